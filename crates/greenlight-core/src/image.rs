//! Container image references and the mutable-tag policy (lint rule GL001 and
//! `greenlight guard image`).
//!
//! Owns: parsing a reference the way Docker and containerd do (the distribution reference
//! grammar plus Docker's normalization), and judging whether what it names can change under
//! the same string. Must never do IO: resolving a tag against a registry (`guard image
//! --resolve`) is the binary's job; this module only says what a reference *is*.
//!
//! The parser exists because the obvious shortcut — "the tag is whatever follows the last
//! colon" — reads `registry:5000/app` as the tag `5000/app`, so peers (kube-score, Polaris)
//! wave through the very untagged image they exist to catch.

use std::fmt;

/// The registry Docker assumes when the first path component does not look like a host.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// Docker Hub's official images live under this namespace (`nginx` is `library/nginx`).
const OFFICIAL_NAMESPACE: &str = "library/";
/// An old spelling of Docker Hub that Docker normalizes to [`DEFAULT_REGISTRY`].
const LEGACY_DEFAULT_REGISTRY: &str = "index.docker.io";
/// The distribution grammar caps the name (registry and path, as written) at 255 bytes.
const NAME_MAX: usize = 255;
/// The distribution grammar caps a tag at 128 characters.
const TAG_MAX: usize = 128;

/// Tags that, by convention, move to new content on every build. Dispatching one of them
/// redeploys the same string, so Kubernetes sees no change and rolls out nothing.
pub const DEFAULT_MUTABLE_TAGS: [&str; 5] = ["latest", "main", "master", "stable", "edge"];

/// A parsed image reference: `[registry/]repository[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    original: String,
    /// Byte length of the name as written (registry and path, before `:tag` / `@digest`).
    written_name_len: usize,
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl ImageRef {
    /// Parses a reference such as `nginx`, `ghcr.io/acme/web:1.4.2`,
    /// `registry:5000/app@sha256:…` or `app:v1@sha256:…`.
    ///
    /// The first path component is a registry when it contains `.` or `:`, is `localhost`, or
    /// has an uppercase letter (hostnames may, repositories may not); otherwise the registry is
    /// `docker.io`, and a single-component Docker Hub name gets the `library/` namespace.
    pub fn parse(input: &str) -> Result<ImageRef, ImageRefError> {
        parse(input).map_err(|reason| ImageRefError {
            reference: input.to_string(),
            reason,
        })
    }

    /// The reference exactly as it was written.
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// The registry host, with its port when one was given (`docker.io` by default).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path inside the registry, normalized (`nginx` → `library/nginx`).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if one was written. A missing tag means `latest` to Docker.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest (`sha256:…`), if one was written.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The name as the user wrote it, without tag or digest (`nginx`, not `docker.io/library/nginx`).
    pub fn written_name(&self) -> &str {
        &self.original[..self.written_name_len]
    }

    /// The reference as written, pinned to `digest`: `app:v1` → `app:v1@sha256:…`.
    /// A digest already present is replaced, so the result names exactly one manifest.
    pub fn pinned_to(&self, digest: &str) -> String {
        let without_digest = match self.original.find('@') {
            Some(at) => &self.original[..at],
            None => &self.original,
        };
        format!("{without_digest}@{digest}")
    }
}

/// The fully qualified form: `docker.io/library/nginx:1.27`.
impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ImageRef {
    type Err = ImageRefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImageRef::parse(s)
    }
}

/// An image reference that does not follow the grammar. Names the reference and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// Escaped, so a stray `\r` from a CRLF file or a tab shows up instead of hiding in the message.
#[error("invalid image reference `{}`: {reason}", reference.escape_debug())]
pub struct ImageRefError {
    /// The reference as given (may be empty or contain whitespace).
    pub reference: String,
    pub reason: ImageRefErrorReason,
}

/// Why a reference was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageRefErrorReason {
    #[error("the reference is empty")]
    Empty,
    #[error("whitespace at byte {position} (Kubernetes rejects images with whitespace)")]
    Whitespace { position: usize },
    #[error("the repository name is missing")]
    MissingName,
    #[error("the name is {len} bytes long; the limit is {NAME_MAX}")]
    NameTooLong { len: usize },
    #[error("empty path component in `{name}` (a doubled or trailing `/`)")]
    EmptyComponent { name: String },
    #[error("repository `{component}` must be lowercase")]
    Uppercase { component: String },
    #[error(
        "path component `{component}` is not lowercase letters and digits joined by `.`, `_`, `__` or dashes"
    )]
    InvalidComponent { component: String },
    #[error("registry host `{host}` is not a valid hostname or [IPv6] address")]
    InvalidHost { host: String },
    #[error("registry port `{port}` is not a number from 1 to 65535")]
    InvalidPort { port: String },
    #[error("the tag after `:` is empty")]
    EmptyTag,
    #[error(
        "tag `{tag}` must start with a letter, digit or `_` and contain only those, `.` and `-`"
    )]
    InvalidTag { tag: String },
    #[error("tag is {len} characters long; the limit is {TAG_MAX}")]
    TagTooLong { len: usize },
    #[error(
        "digest `{digest}` is not `<algorithm>:<encoded>` (for example `sha256:` and 64 hex digits)"
    )]
    MalformedDigest { digest: String },
    #[error("digest `{digest}`: {algorithm} needs exactly {expected} lowercase hex digits")]
    InvalidDigestHex {
        digest: String,
        algorithm: String,
        expected: usize,
    },
}

fn parse(input: &str) -> Result<ImageRef, ImageRefErrorReason> {
    use ImageRefErrorReason as R;
    if input.is_empty() {
        return Err(R::Empty);
    }
    if let Some((position, _)) = input.char_indices().find(|(_, c)| c.is_whitespace()) {
        return Err(R::Whitespace { position });
    }

    // Neither names nor tags may contain `@`, so the first one starts the digest.
    let (name_and_tag, digest) = match input.split_once('@') {
        Some((left, digest)) => (left, Some(digest)),
        None => (input, None),
    };
    // A colon starts the tag only when no `/` follows it: in `registry:5000/app` the colon
    // belongs to the port.
    let (name, tag) = match name_and_tag.rfind(':') {
        Some(colon) if !name_and_tag[colon + 1..].contains('/') => {
            (&name_and_tag[..colon], Some(&name_and_tag[colon + 1..]))
        }
        _ => (name_and_tag, None),
    };

    if name.is_empty() {
        return Err(R::MissingName);
    }
    if name.len() > NAME_MAX {
        return Err(R::NameTooLong { len: name.len() });
    }
    if let Some(tag) = tag {
        validate_tag(tag)?;
    }
    if let Some(digest) = digest {
        validate_digest(digest)?;
    }

    let (registry, path) = match name.split_once('/') {
        Some((first, rest)) if looks_like_registry(first) => (Some(first), rest),
        _ => (None, name),
    };
    if let Some(registry) = registry {
        validate_registry(registry)?;
    }
    if path.is_empty() || path.split('/').any(str::is_empty) {
        return Err(if path.is_empty() && registry.is_some() {
            R::MissingName
        } else {
            R::EmptyComponent {
                name: name.to_string(),
            }
        });
    }
    for component in path.split('/') {
        validate_component(component)?;
    }

    let registry = match registry {
        None | Some(LEGACY_DEFAULT_REGISTRY) => DEFAULT_REGISTRY,
        Some(host) => host,
    };
    let repository = if registry == DEFAULT_REGISTRY && !path.contains('/') {
        format!("{OFFICIAL_NAMESPACE}{path}")
    } else {
        path.to_string()
    };

    Ok(ImageRef {
        original: input.to_string(),
        written_name_len: name.len(),
        registry: registry.to_string(),
        repository,
        tag: tag.map(str::to_string),
        digest: digest.map(str::to_string),
    })
}

/// Docker's rule for telling `host/repo` from `namespace/repo`.
fn looks_like_registry(first: &str) -> bool {
    first.contains(['.', ':'])
        || first == "localhost"
        || first.bytes().any(|b| b.is_ascii_uppercase())
}

fn validate_registry(registry: &str) -> Result<(), ImageRefErrorReason> {
    use ImageRefErrorReason as R;
    // An IPv6 literal must be bracketed, so its colons never collide with the port's.
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(R::InvalidHost {
                host: registry.to_string(),
            });
        };
        let (inside, after) = (&rest[..close], &rest[close + 1..]);
        if inside.is_empty() || inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(R::InvalidHost {
                host: registry.to_string(),
            });
        }
        match after.strip_prefix(':') {
            Some(port) => (None, Some(port)),
            None if after.is_empty() => (None, None),
            None => {
                return Err(R::InvalidHost {
                    host: registry.to_string(),
                });
            }
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(registry), None),
        }
    };
    if let Some(host) = host {
        let label_ok = |label: &str| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label_ok) {
            return Err(R::InvalidHost {
                host: host.to_string(),
            });
        }
    }
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p > 0);
        if !valid {
            return Err(R::InvalidPort {
                port: port.to_string(),
            });
        }
    }
    Ok(())
}

/// `[a-z0-9]+` runs joined by exactly one separator: `.`, `_`, `__`, or any number of `-`.
fn validate_component(component: &str) -> Result<(), ImageRefErrorReason> {
    use ImageRefErrorReason as R;
    let invalid = || R::InvalidComponent {
        component: component.to_string(),
    };
    if component.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(R::Uppercase {
            component: component.to_string(),
        });
    }
    let bytes = component.as_bytes();
    let is_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(|&b| is_alnum(b)) || !bytes.last().is_some_and(|&b| is_alnum(b)) {
        return Err(invalid());
    }
    let mut i = 0;
    while i < bytes.len() {
        if is_alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return Err(invalid());
        }
    }
    Ok(())
}

fn validate_tag(tag: &str) -> Result<(), ImageRefErrorReason> {
    use ImageRefErrorReason as R;
    if tag.is_empty() {
        return Err(R::EmptyTag);
    }
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    if !word(bytes[0]) || !bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-') {
        return Err(R::InvalidTag {
            tag: tag.to_string(),
        });
    }
    if tag.len() > TAG_MAX {
        return Err(R::TagTooLong { len: tag.len() });
    }
    Ok(())
}

/// Checks a digest such as `sha256:<64 hex>` against the OCI digest grammar: `algorithm ":"
/// encoded`, algorithm components `[a-z0-9]+` joined by `+ . _ -`, encoded `[a-zA-Z0-9=_-]+`.
/// Registered algorithms (sha256, sha384, sha512, blake3) fix the encoding to lowercase hex of
/// their length, which is what every registry and runtime checks. Also for digests a registry
/// reports (`Docker-Content-Digest`), which must not be trusted blindly.
pub fn validate_digest(digest: &str) -> Result<(), ImageRefErrorReason> {
    use ImageRefErrorReason as R;
    let malformed = || R::MalformedDigest {
        digest: digest.to_string(),
    };
    let Some((algorithm, encoded)) = digest.split_once(':') else {
        return Err(malformed());
    };
    let algorithm_ok = algorithm.split(['+', '.', '_', '-']).all(|c| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    let encoded_ok = !encoded.is_empty()
        && encoded
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'=' | b'_' | b'-'));
    if !algorithm_ok || !encoded_ok {
        return Err(malformed());
    }
    let expected = match algorithm {
        "sha256" | "blake3" => Some(64),
        "sha384" => Some(96),
        "sha512" => Some(128),
        _ => None,
    };
    if let Some(expected) = expected {
        let hex = encoded
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if encoded.len() != expected || !hex {
            return Err(R::InvalidDigestHex {
                digest: digest.to_string(),
                algorithm: algorithm.to_string(),
                expected,
            });
        }
    }
    Ok(())
}

/// Which tags count as mutable: those on the `mutable` list, and every tag that names no
/// version ([`names_no_version`]) unless a team declared it on the `immutable` list (a word
/// it never pushes twice, such as `blue`). Matching ignores ASCII case (`Latest` moves as
/// `latest` does); an entry ending in `*` matches by prefix (`nightly*`). The `mutable` list
/// wins over the `immutable` one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPolicy {
    pub mutable: Vec<String>,
    pub immutable: Vec<String>,
}

impl Default for TagPolicy {
    fn default() -> Self {
        TagPolicy {
            mutable: DEFAULT_MUTABLE_TAGS.iter().map(|t| t.to_string()).collect(),
            immutable: Vec::new(),
        }
    }
}

/// Words that name a moving line rather than one build: conventions for "the newest" and
/// for branches, and base-image flavours and distribution codenames that follow updates.
/// A tag is a known floating name when one of its `-`/`_`/`.` parts is one of these.
pub const FLOATING_WORDS: &[&str] = &[
    "latest",
    "main",
    "master",
    "stable",
    "edge",
    "alpine",
    "slim",
    "develop",
    "development",
    "dev",
    "trunk",
    "nightly",
    "next",
    "canary",
    "head",
    "current",
    "lts",
    "mainline",
    "unstable",
    "testing",
    "rolling",
    "snapshot",
    "preview",
    "beta",
    "alpha",
    "bookworm",
    "bullseye",
    "buster",
    "trixie",
    "jammy",
    "noble",
    "focal",
];

/// First words of tags built from branch names (`feature-login`, `pr-1234` is versioned).
const BRANCH_PREFIXES: &[&str] = &[
    "feature", "feat", "fix", "bugfix", "hotfix", "release", "branch",
];

fn matches_entry(entry: &str, tag: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(prefix) => tag
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix)),
        None => entry.eq_ignore_ascii_case(tag),
    }
}

impl TagPolicy {
    /// The default list plus `extra` (from a config file or the command line).
    pub fn with_extra<I, S>(mut self, extra: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for tag in extra {
            let tag = tag.into();
            let tag = tag.trim();
            if !tag.is_empty() && !self.mutable.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
                self.mutable.push(tag.to_string());
            }
        }
        self
    }

    /// The policy plus tags a team declares immutable (`[lint] immutable-tags`).
    pub fn with_immutable<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for tag in tags {
            let tag = tag.into();
            let tag = tag.trim();
            if !tag.is_empty() && !self.immutable.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
                self.immutable.push(tag.to_string());
            }
        }
        self
    }

    /// Whether `tag` can move to new content: it is on the mutable list, or it names no
    /// version (see [`names_no_version`]) and is not on the immutable list.
    pub fn is_mutable(&self, tag: &str) -> bool {
        self.mutable.iter().any(|e| matches_entry(e, tag))
            || (names_no_version(tag) && !self.immutable.iter().any(|e| matches_entry(e, tag)))
    }

    /// Whether a mutable `tag` is known to float — on the mutable list, a `*-latest` tag,
    /// a tag with a part in [`FLOATING_WORDS`] (`stable-alpine`, `bookworm-slim`) or one made
    /// from a branch name (`feature-login`) — rather than merely naming no version (`blue`,
    /// `green`, `prod`), which a team may never push twice.
    pub fn is_known_floating(&self, tag: &str) -> bool {
        let lower = tag.to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(['-', '_', '.']).collect();
        self.mutable.iter().any(|e| matches_entry(e, tag))
            || ["-latest", "_latest", ".latest"]
                .iter()
                .any(|s| lower.ends_with(s))
            || parts.iter().any(|p| FLOATING_WORDS.contains(p))
            || (parts.len() > 1 && BRANCH_PREFIXES.contains(&parts[0]))
    }

    /// Judges what `image` will name at deploy time. A digest wins over any tag: the runtime
    /// pulls by digest and ignores the tag.
    pub fn judge(&self, image: &ImageRef) -> TagVerdict {
        match (image.digest(), image.tag()) {
            (Some(_), _) => TagVerdict::PinnedByDigest,
            (None, None) => TagVerdict::MissingTag,
            (None, Some(tag)) if self.is_mutable(tag) => TagVerdict::MutableTag {
                tag: tag.to_string(),
            },
            (None, Some(_)) => TagVerdict::ImmutableTag,
        }
    }
}

/// A floating tag: one that names no version, so it follows whatever is published next —
/// no digit at all (`alpine`, `stable-alpine`, `mainline`, `bookworm`, `edge`), or a
/// `latest` variant of a line (`3.12-latest`, `node_latest`). A digit-free run of at least 7
/// hex letters (`sha-abcdefa`) is taken for a short commit hash, which is a version.
pub fn names_no_version(tag: &str) -> bool {
    let lower = tag.to_ascii_lowercase();
    if ["-latest", "_latest", ".latest"]
        .iter()
        .any(|s| lower.ends_with(s))
    {
        return true;
    }
    if tag.bytes().any(|b| b.is_ascii_digit()) {
        return false;
    }
    !lower
        .split(['-', '_', '.'])
        .any(|run| run.len() >= 7 && run.bytes().all(|b| (b'a'..=b'f').contains(&b)))
}

/// What a reference will name at deploy time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagVerdict {
    /// `@sha256:…` present (with or without a tag): names exactly one manifest. Acceptable.
    PinnedByDigest,
    /// A tag not on the mutable list (`1.4.2`, `sha-1a2b3c4`). Acceptable.
    ImmutableTag,
    /// A tag on the mutable list. Rejected.
    MutableTag { tag: String },
    /// No tag and no digest: Docker pulls `latest`. Rejected.
    MissingTag,
}

impl TagVerdict {
    /// Whether the reference may be dispatched.
    pub fn is_acceptable(&self) -> bool {
        matches!(self, TagVerdict::PinnedByDigest | TagVerdict::ImmutableTag)
    }

    /// What is wrong, naming the reference; `None` when acceptable.
    pub fn problem(&self, image: &ImageRef) -> Option<String> {
        let why = "the same reference can point at new content, so a redeploy renders an \
                   identical pod spec and Kubernetes rolls out nothing while every check \
                   reports success";
        match self {
            TagVerdict::PinnedByDigest | TagVerdict::ImmutableTag => None,
            TagVerdict::MutableTag { tag } => Some(format!(
                "`{}` uses the mutable tag `{tag}`: {why}",
                image.as_str()
            )),
            TagVerdict::MissingTag => Some(format!(
                "`{}` has no tag, so it means the mutable tag `latest`: {why}",
                image.as_str()
            )),
        }
    }

    /// How to fix it, with the reference's own name; `None` when acceptable.
    pub fn fix(&self, image: &ImageRef) -> Option<String> {
        if self.is_acceptable() {
            return None;
        }
        let name = image.written_name();
        Some(format!(
            "dispatch an immutable tag such as `{name}:sha-<short-sha>`, or pin the digest \
             `{name}@sha256:<digest>` (`greenlight guard image --resolve {}` prints it)",
            image.as_str()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_floating_names_and_declared_immutable_words() {
        let p = TagPolicy::default();
        for t in [
            "latest",
            "stable-alpine",
            "bookworm-slim",
            "3.12-latest",
            "feature-login",
            "nightly",
            "Main",
        ] {
            assert!(p.is_mutable(t) && p.is_known_floating(t), "{t}");
        }
        for t in ["blue", "green", "prod"] {
            assert!(p.is_mutable(t) && !p.is_known_floating(t), "{t}");
        }
        assert!(!p.is_known_floating("pr-1234"));
        let team = TagPolicy::default().with_immutable(["blue", "release-*"]);
        assert!(!team.is_mutable("blue") && !team.is_mutable("Blue"));
        assert!(!team.is_mutable("release-candidate"));
        assert!(team.is_mutable("green"));
        // The mutable list wins: `latest` cannot be declared immutable.
        assert!(
            TagPolicy::default()
                .with_immutable(["latest"])
                .is_mutable("latest")
        );
    }

    const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parts(input: &str) -> (String, String, Option<String>, Option<String>) {
        let r = ImageRef::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        (
            r.registry().to_string(),
            r.repository().to_string(),
            r.tag().map(str::to_string),
            r.digest().map(str::to_string),
        )
    }

    fn reason(input: &str) -> ImageRefErrorReason {
        match ImageRef::parse(input) {
            Ok(r) => panic!("{input} parsed as {r:?}"),
            Err(e) => {
                assert_eq!(e.reference, input);
                e.reason
            }
        }
    }

    fn s(x: &str) -> Option<String> {
        Some(x.to_string())
    }

    #[test]
    fn docker_hub_names_are_normalized() {
        assert_eq!(
            parts("nginx"),
            ("docker.io".into(), "library/nginx".into(), None, None)
        );
        assert_eq!(
            parts("nginx:1.27"),
            ("docker.io".into(), "library/nginx".into(), s("1.27"), None)
        );
        assert_eq!(
            parts("bitnami/redis:7.2"),
            ("docker.io".into(), "bitnami/redis".into(), s("7.2"), None)
        );
        assert_eq!(
            parts("docker.io/nginx"),
            ("docker.io".into(), "library/nginx".into(), None, None)
        );
        assert_eq!(
            parts("index.docker.io/library/nginx:latest"),
            (
                "docker.io".into(),
                "library/nginx".into(),
                s("latest"),
                None
            )
        );
        assert_eq!(
            ImageRef::parse("nginx").unwrap().to_string(),
            "docker.io/library/nginx"
        );
    }

    #[test]
    fn registry_is_detected_by_dot_colon_localhost_or_uppercase() {
        assert_eq!(
            parts("ghcr.io/acme/web:v1").0,
            "ghcr.io",
            "a dot marks a host"
        );
        assert_eq!(parts("localhost/app").0, "localhost");
        assert_eq!(
            parts("localhost/app").1,
            "app",
            "no library/ off Docker Hub"
        );
        assert_eq!(parts("Registry/app").0, "Registry");
        // Without any of those marks the first component is a Docker Hub namespace.
        assert_eq!(
            parts("acme/web"),
            ("docker.io".into(), "acme/web".into(), None, None)
        );
        assert_eq!(parts("localhostx/app").0, "docker.io");
    }

    /// The bug of the last-colon shortcut (see the module comment): `registry:5000/app` read as
    /// tag `5000/app`.
    #[test]
    fn registry_port_is_not_a_tag() {
        assert_eq!(
            parts("registry:5000/app"),
            ("registry:5000".into(), "app".into(), None, None)
        );
        assert_eq!(
            parts("registry:5000/team/app:v2"),
            ("registry:5000".into(), "team/app".into(), s("v2"), None)
        );
        assert_eq!(
            parts("localhost:5000/app:latest"),
            ("localhost:5000".into(), "app".into(), s("latest"), None)
        );
        assert_eq!(
            parts("10.0.0.1:5000/app"),
            ("10.0.0.1:5000".into(), "app".into(), None, None)
        );
        assert_eq!(
            parts("[::1]:5000/app:v1"),
            ("[::1]:5000".into(), "app".into(), s("v1"), None)
        );
        assert_eq!(
            parts("[fe80::1]/app"),
            ("[fe80::1]".into(), "app".into(), None, None)
        );
        let policy = TagPolicy::default();
        let untagged = ImageRef::parse("registry:5000/app").unwrap();
        assert_eq!(policy.judge(&untagged), TagVerdict::MissingTag);
        // A bare `host:port` has no `/`, so Docker reads it as image `host` with tag `port`.
        assert_eq!(
            parts("localhost:5000"),
            (
                "docker.io".into(),
                "library/localhost".into(),
                s("5000"),
                None
            )
        );
    }

    #[test]
    fn digests_with_and_without_tags() {
        let pinned = format!("registry:5000/app@sha256:{HEX64}");
        assert_eq!(
            parts(&pinned),
            (
                "registry:5000".into(),
                "app".into(),
                None,
                Some(format!("sha256:{HEX64}"))
            )
        );
        let both = format!("ghcr.io/acme/web:latest@sha256:{HEX64}");
        let r = ImageRef::parse(&both).unwrap();
        assert_eq!(r.tag(), Some("latest"));
        assert_eq!(r.digest(), Some(format!("sha256:{HEX64}").as_str()));
        assert_eq!(r.written_name(), "ghcr.io/acme/web");
        assert_eq!(
            TagPolicy::default().judge(&r),
            TagVerdict::PinnedByDigest,
            "a digest wins over a mutable tag"
        );
        let sha512 = format!("app@sha512:{HEX64}{HEX64}");
        assert_eq!(parts(&sha512).3, Some(format!("sha512:{HEX64}{HEX64}")));
        // Unregistered algorithms follow the OCI grammar without a fixed length.
        assert_eq!(
            parts("app@multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8").3,
            s("multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8")
        );
    }

    #[test]
    fn bad_digests_are_rejected_with_the_reason() {
        assert!(matches!(
            reason("app@sha256:abc"),
            ImageRefErrorReason::InvalidDigestHex { expected: 64, .. }
        ));
        let upper = format!("app@sha256:{}", HEX64.to_uppercase());
        assert!(matches!(
            reason(&upper),
            ImageRefErrorReason::InvalidDigestHex { .. }
        ));
        assert!(matches!(
            reason(&format!("app@{HEX64}")),
            ImageRefErrorReason::MalformedDigest { .. }
        ));
        assert!(matches!(
            reason("app@sha256:"),
            ImageRefErrorReason::MalformedDigest { .. }
        ));
        assert!(matches!(
            reason(&format!("app@SHA256:{HEX64}")),
            ImageRefErrorReason::MalformedDigest { .. }
        ));
        assert!(matches!(
            reason(&format!("app@sha256:{HEX64}@sha256:{HEX64}")),
            ImageRefErrorReason::MalformedDigest { .. }
        ));
    }

    #[test]
    fn empty_whitespace_and_missing_parts() {
        assert_eq!(reason(""), ImageRefErrorReason::Empty);
        assert_eq!(
            reason(" nginx"),
            ImageRefErrorReason::Whitespace { position: 0 }
        );
        assert_eq!(
            reason("nginx:1.2\n"),
            ImageRefErrorReason::Whitespace { position: 9 }
        );
        assert_eq!(
            reason("my app"),
            ImageRefErrorReason::Whitespace { position: 2 }
        );
        assert_eq!(reason(":v1"), ImageRefErrorReason::MissingName);
        assert_eq!(
            reason(&format!("@sha256:{HEX64}")),
            ImageRefErrorReason::MissingName
        );
        assert_eq!(reason("nginx:"), ImageRefErrorReason::EmptyTag);
        assert_eq!(reason("ghcr.io/"), ImageRefErrorReason::MissingName);
        assert!(matches!(
            reason("acme//web"),
            ImageRefErrorReason::EmptyComponent { .. }
        ));
        assert!(matches!(
            reason("acme/web/"),
            ImageRefErrorReason::EmptyComponent { .. }
        ));
    }

    #[test]
    fn uppercase_repository_is_an_error_naming_the_component() {
        assert_eq!(
            reason("Nginx"),
            ImageRefErrorReason::Uppercase {
                component: "Nginx".into()
            }
        );
        assert_eq!(
            reason("ghcr.io/Acme/web:v1"),
            ImageRefErrorReason::Uppercase {
                component: "Acme".into()
            }
        );
        // Tags may be mixed case.
        assert_eq!(parts("app:V1.0-RC1").2, s("V1.0-RC1"));
    }

    #[test]
    fn path_component_separators() {
        for ok in [
            "a.b",
            "a_b",
            "a__b",
            "a-b",
            "a---b",
            "a.b-c_d__e",
            "0",
            "a1",
        ] {
            assert!(ImageRef::parse(ok).is_ok(), "{ok} should parse");
        }
        for bad in [
            "a..b", "a___b", "a._b", "a-.b", "-a", "a-", ".a", "a_", "a+b",
        ] {
            assert!(
                matches!(reason(bad), ImageRefErrorReason::InvalidComponent { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_tags_hosts_and_ports() {
        assert!(matches!(
            reason("app:-v1"),
            ImageRefErrorReason::InvalidTag { .. }
        ));
        assert!(matches!(
            reason("app:v1+build"),
            ImageRefErrorReason::InvalidTag { .. }
        ));
        assert_eq!(
            parts(&format!("app:{}", "a".repeat(128))).2.unwrap().len(),
            128
        );
        assert_eq!(
            reason(&format!("app:{}", "a".repeat(129))),
            ImageRefErrorReason::TagTooLong { len: 129 }
        );
        assert_eq!(
            reason("registry:99999/app"),
            ImageRefErrorReason::InvalidPort {
                port: "99999".into()
            }
        );
        assert_eq!(
            reason("registry:0/app"),
            ImageRefErrorReason::InvalidPort { port: "0".into() }
        );
        assert_eq!(
            reason("registry:/app"),
            ImageRefErrorReason::InvalidPort { port: "".into() }
        );
        assert!(matches!(
            reason("-bad.io/app"),
            ImageRefErrorReason::InvalidHost { .. }
        ));
        assert!(matches!(
            reason("bad..io/app"),
            ImageRefErrorReason::InvalidHost { .. }
        ));
        assert!(matches!(
            reason("[::1/app"),
            ImageRefErrorReason::InvalidHost { .. }
        ));
        assert!(matches!(
            reason("[nothex]:5000/app"),
            ImageRefErrorReason::InvalidHost { .. }
        ));
        let long = format!("ghcr.io/{}", "a".repeat(250));
        assert_eq!(
            reason(&long),
            ImageRefErrorReason::NameTooLong { len: long.len() }
        );
    }

    #[test]
    fn error_message_names_the_reference_and_reason() {
        let err = ImageRef::parse("ghcr.io/Acme/web").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid image reference `ghcr.io/Acme/web`: repository `Acme` must be lowercase"
        );
        let crlf = ImageRef::parse("nginx:1.27\r").unwrap_err();
        assert_eq!(
            crlf.to_string(),
            "invalid image reference `nginx:1.27\\r`: whitespace at byte 10 \
             (Kubernetes rejects images with whitespace)"
        );
    }

    #[test]
    fn policy_judges_each_kind() {
        let policy = TagPolicy::default();
        let judge = |r: &str| policy.judge(&ImageRef::parse(r).unwrap());
        for tag in DEFAULT_MUTABLE_TAGS {
            assert_eq!(
                judge(&format!("ghcr.io/acme/web:{tag}")),
                TagVerdict::MutableTag { tag: tag.into() }
            );
        }
        assert_eq!(
            judge("app:Latest"),
            TagVerdict::MutableTag {
                tag: "Latest".into()
            }
        );
        assert_eq!(judge("app"), TagVerdict::MissingTag);
        assert_eq!(judge("app:sha-1a2b3c4"), TagVerdict::ImmutableTag);
        assert_eq!(judge("app:1.4.2"), TagVerdict::ImmutableTag);
        assert_eq!(judge("app:latest-1.4"), TagVerdict::ImmutableTag);
        assert_eq!(
            judge(&format!("app@sha256:{HEX64}")),
            TagVerdict::PinnedByDigest
        );
        assert!(judge("app:1.4.2").is_acceptable());
        assert!(!judge("app").is_acceptable());
    }

    #[test]
    fn version_less_tags_are_mutable() {
        let policy = TagPolicy::default();
        for tag in [
            "alpine",
            "stable-alpine",
            "mainline",
            "mainline-alpine",
            "bookworm",
            "slim",
            "3.12-latest",
            "node_latest",
            "v2.latest",
        ] {
            assert!(policy.is_mutable(tag), "{tag}");
            assert_eq!(
                policy.judge(&ImageRef::parse(&format!("nginx:{tag}")).unwrap()),
                TagVerdict::MutableTag { tag: tag.into() }
            );
        }
        for tag in [
            "1.27-alpine",
            "v1",
            "sha-1a2b3c4",
            "sha-abcdefa",
            "deadbeefcafe",
            "2024-12-02",
            "latest-1.4",
        ] {
            assert!(!policy.is_mutable(tag), "{tag}");
        }
    }

    #[test]
    fn policy_extra_tags_and_prefixes() {
        let policy = TagPolicy::default().with_extra(["dev", " nightly* ", "LATEST", ""]);
        assert_eq!(policy.mutable.len(), 7, "{:?}", policy.mutable);
        let judge = |r: &str| policy.judge(&ImageRef::parse(r).unwrap());
        assert_eq!(
            judge("app:dev"),
            TagVerdict::MutableTag { tag: "dev".into() }
        );
        assert_eq!(
            judge("app:nightly-2026-12-02"),
            TagVerdict::MutableTag {
                tag: "nightly-2026-12-02".into()
            }
        );
        assert_eq!(judge("app:develop-7"), TagVerdict::ImmutableTag);
        assert!(!TagPolicy::default().is_mutable("dev7"));
    }

    #[test]
    fn messages_name_the_reference_and_carry_the_fix() {
        let policy = TagPolicy::default();
        let r = ImageRef::parse("registry:5000/team/web:main").unwrap();
        let verdict = policy.judge(&r);
        let problem = verdict.problem(&r).unwrap();
        assert!(
            problem.contains("`registry:5000/team/web:main`"),
            "{problem}"
        );
        assert!(problem.contains("mutable tag `main`"), "{problem}");
        let fix = verdict.fix(&r).unwrap();
        assert!(
            fix.contains("`registry:5000/team/web:sha-<short-sha>`"),
            "{fix}"
        );
        assert!(
            fix.contains("`registry:5000/team/web@sha256:<digest>`"),
            "{fix}"
        );

        let bare = ImageRef::parse("nginx").unwrap();
        let missing = policy.judge(&bare);
        assert!(missing.problem(&bare).unwrap().contains("no tag"));
        assert!(
            missing
                .fix(&bare)
                .unwrap()
                .contains("`nginx:sha-<short-sha>`")
        );

        let ok = ImageRef::parse("nginx:1.27").unwrap();
        assert_eq!(policy.judge(&ok).problem(&ok), None);
        assert_eq!(policy.judge(&ok).fix(&ok), None);
    }

    #[test]
    fn pinned_to_keeps_the_written_name_and_tag() {
        let r = ImageRef::parse("registry:5000/app:v1").unwrap();
        let d = format!("sha256:{HEX64}");
        assert_eq!(r.pinned_to(&d), format!("registry:5000/app:v1@{d}"));
        let already = ImageRef::parse(&format!("app:v1@sha512:{HEX64}{HEX64}")).unwrap();
        assert_eq!(already.pinned_to(&d), format!("app:v1@{d}"));
        assert!(ImageRef::parse(&r.pinned_to(&d)).is_ok());
    }
}
