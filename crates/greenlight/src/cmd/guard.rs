//! `greenlight guard image`: the dispatch-time mutable-tag guard (T1) and, with `--resolve`,
//! pinning a tag to the digest the registry serves for it (T5).
//!
//! Owns: the command line, the `[guard]` table of the config file, and a minimal OCI
//! distribution client (manifest HEAD/GET plus the anonymous bearer-token dance). Parsing and
//! judging references is `greenlight_core::image`'s job, not this file's.
//! Must never: put the registry token in process arguments, logs or error messages (it is read
//! from a file and only ever sent as an `Authorization` header to the registry itself), or
//! print anything on stdout but pinned references, so CI can capture them.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use greenlight_core::image::{DEFAULT_REGISTRY, ImageRef, TagPolicy, TagVerdict, validate_digest};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode, Url};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Every manifest type a deploy may point at: multi-arch indexes first, since a tag that names
/// an index must be pinned to the index digest, not to one platform's manifest.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// The distribution spec lets registries refuse manifests over 4 MiB; anything larger is not a
/// manifest, and reading it whole would let a hostile server exhaust memory.
const MANIFEST_MAX_BYTES: usize = 4 * 1024 * 1024;

#[derive(Args)]
pub struct GuardArgs {
    #[command(subcommand)]
    pub command: GuardCommand,
}

#[derive(Subcommand)]
pub enum GuardCommand {
    /// Reject image references whose tag can move (latest, main, master, stable, edge, none).
    ///
    /// Exit 0 when every reference is pinned by digest or uses another tag, 1 when one uses a
    /// mutable tag (each is named, with the fix), 2 when one cannot be parsed.
    /// With --resolve, each reference is pinned to the digest the registry serves and printed
    /// as `<image>@sha256:…` on stdout; what is dispatched is then that pinned reference, so a
    /// mutable tag is no longer an error (a note on stderr says so), and an image the registry
    /// cannot resolve is (exit 1).
    Image(ImageArgs),
}

#[derive(Args)]
pub struct ImageArgs {
    /// Image references, e.g. ghcr.io/acme/web:sha-1a2b3c4 or registry:5000/app@sha256:…
    #[arg(required = true, value_name = "IMAGE")]
    images: Vec<String>,

    /// More tags to treat as mutable, added to the defaults and the config file's list
    /// (comma-separated, repeatable; a trailing `*` matches a prefix, e.g. `nightly*`)
    #[arg(long, value_delimiter = ',', value_name = "TAG,...")]
    mutable: Vec<String>,

    /// Config file whose `[lint]` and `[guard]` `mutable-tags = [...]` add mutable tags
    /// [default: .greenlight.toml when present]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Ask the registry for each image's digest and print `<image>@sha256:…` on stdout
    #[arg(long)]
    resolve: bool,

    /// Talk to the registry over plain HTTP (a local registry)
    #[arg(long, requires = "resolve")]
    plain_http: bool,

    /// File holding a bearer token for the registry; without it pulls are anonymous.
    /// (There is deliberately no option taking the token itself: argv is visible to every
    /// process on the machine.)
    #[arg(long, requires = "resolve", value_name = "FILE")]
    token_file: Option<PathBuf>,

    /// Give up on a registry request after this long
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    timeout: String,
}

pub fn run(args: GuardArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        GuardCommand::Image(args) => run_image(args),
    }
}

fn run_image(args: ImageArgs) -> anyhow::Result<ExitCode> {
    let timeout = super::positive_duration_flag("--timeout", &args.timeout)?;
    let config = super::config_file(args.config.as_deref())?;
    let policy = TagPolicy::default()
        .with_extra(config.guard_mutable_tags())
        .with_extra(args.mutable.iter().map(String::as_str));

    let mut images = Vec::with_capacity(args.images.len());
    let mut invalid = Vec::new();
    for raw in &args.images {
        match ImageRef::parse(raw) {
            Ok(image) => images.push(image),
            Err(err) => invalid.push(err.to_string()),
        }
    }
    if !invalid.is_empty() {
        // One line per bad reference, each read as an error; main prints the first prefix.
        return Err(super::usage(invalid.join("\nerror: ")));
    }

    if args.resolve {
        let token = match &args.token_file {
            Some(path) => Some(BearerToken::read(path)?),
            None => None,
        };
        return resolve_all(&images, &policy, &args, timeout, token);
    }

    let mut rejected = 0;
    for image in &images {
        let verdict = policy.judge(image);
        match (verdict.problem(image), verdict.fix(image)) {
            (Some(problem), Some(fix)) => {
                rejected += 1;
                eprintln!("error: {problem}\n  fix: {fix}");
            }
            _ => eprintln!(
                "ok: `{}` {}",
                image.as_str(),
                why_acceptable(&verdict, image)
            ),
        }
    }
    if rejected > 0 {
        eprintln!(
            "{rejected} of {} image reference(s) rejected: mutable tags roll out nothing when redeployed",
            images.len()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn why_acceptable(verdict: &TagVerdict, image: &ImageRef) -> String {
    match (verdict, image.tag()) {
        (TagVerdict::PinnedByDigest, _) => "is pinned by digest".to_string(),
        (_, Some(tag)) => format!("uses the tag `{tag}`, which is not on the mutable list"),
        (_, None) => String::new(),
    }
}

fn resolve_all(
    images: &[ImageRef],
    policy: &TagPolicy,
    args: &ImageArgs,
    timeout: Duration,
    token: Option<BearerToken>,
) -> anyhow::Result<ExitCode> {
    // reqwest is built without a default crypto provider; the binary picks ring. Another
    // command may already have installed it, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("greenlight/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the HTTP client")?;
    let registry = RegistryClient {
        client,
        scheme: if args.plain_http { "http" } else { "https" },
        token,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    let mut failed = 0;
    for image in images {
        if image.digest().is_some() {
            // It already names exactly one manifest; asking the registry adds nothing.
            println!("{}", image.as_str());
            eprintln!("ok: `{}` is already pinned by digest", image.as_str());
            continue;
        }
        match runtime.block_on(registry.resolve(image)) {
            Ok(digest) => {
                println!("{}", image.pinned_to(&digest));
                if let Some(problem) = policy.judge(image).problem(image) {
                    eprintln!(
                        "note: {problem}; dispatch the pinned reference printed on stdout, not the tag"
                    );
                }
            }
            Err(err) => {
                failed += 1;
                eprintln!("error: cannot resolve `{}`: {err:#}", image.as_str());
            }
        }
    }
    if failed > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A registry bearer token. Its Debug output is redacted so it cannot leak through `{:?}`.
struct BearerToken(String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl BearerToken {
    /// Reads the token from `path` (the shared token-file reader) and checks it can go in an
    /// HTTP header. Errors name the file and never quote its contents.
    fn read(path: &Path) -> anyhow::Result<BearerToken> {
        let secret = super::secret_file("--token-file", path)?;
        let token = secret.expose();
        if token.bytes().any(|b| b.is_ascii_control() || b == b' ') || !token.is_ascii() {
            return Err(super::usage(format!(
                "--token-file {}: the file must hold one token: printable ASCII, no spaces or line breaks",
                path.display()
            )));
        }
        Ok(BearerToken(token.to_string()))
    }

    fn header(&self) -> HeaderValue {
        bearer_header(&self.0)
    }
}

fn bearer_header(token: &str) -> HeaderValue {
    // Checked to be printable ASCII, so this cannot fail; an anonymous token that is not
    // would be rejected earlier with an error that does not quote it.
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
    value.set_sensitive(true);
    value
}

/// The host that serves the distribution API for `registry`: Docker Hub's API is not on
/// `docker.io` itself.
fn api_host(registry: &str) -> &str {
    if registry == DEFAULT_REGISTRY {
        "registry-1.docker.io"
    } else {
        registry
    }
}

struct RegistryClient {
    client: reqwest::Client,
    scheme: &'static str,
    token: Option<BearerToken>,
}

impl RegistryClient {
    /// The digest the registry serves for `image`'s tag (`latest` when it has none).
    async fn resolve(&self, image: &ImageRef) -> anyhow::Result<String> {
        let reference = image.tag().unwrap_or("latest");
        let where_ = format!("{}/{}:{reference}", image.registry(), image.repository());
        let url = format!(
            "{}://{}/v2/{}/manifests/{reference}",
            self.scheme,
            api_host(image.registry()),
            image.repository()
        );
        let url = Url::parse(&url).with_context(|| format!("bad registry URL for {where_}"))?;
        let mut auth = self.token.as_ref().map(BearerToken::header);

        // HEAD first: the digest is in a header, and Docker Hub does not count a HEAD as a pull.
        let mut response = self.manifest(Method::HEAD, &url, auth.as_ref()).await?;
        if response.status() == StatusCode::UNAUTHORIZED
            && self.token.is_none()
            && let Some(challenge) = BearerChallenge::from_headers(response.headers())
        {
            auth = Some(self.anonymous_token(&challenge, image).await?);
            response = self.manifest(Method::HEAD, &url, auth.as_ref()).await?;
        }
        self.check_status(response.status(), &where_)?;
        if response.status().is_success()
            && let Some(digest) = reported_digest(response.headers())?
        {
            return Ok(digest);
        }

        // No usable digest header (or HEAD refused): fetch the manifest and hash it ourselves.
        let mut response = self.manifest(Method::GET, &url, auth.as_ref()).await?;
        self.check_status(response.status(), &where_)?;
        if !response.status().is_success() {
            bail!(
                "the registry answered HTTP {} for {where_}",
                response.status()
            );
        }
        let reported = reported_digest(response.headers())?;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .with_context(|| format!("reading the manifest of {where_}"))?
        {
            if body.len() + chunk.len() > MANIFEST_MAX_BYTES {
                bail!("the manifest of {where_} is larger than {MANIFEST_MAX_BYTES} bytes");
            }
            body.extend_from_slice(&chunk);
        }
        let computed = format!("sha256:{}", hex(&Sha256::digest(&body)));
        match reported {
            Some(reported) if reported.starts_with("sha256:") && reported != computed => bail!(
                "the registry reports digest {reported} for {where_} but the manifest it sent hashes to {computed}"
            ),
            _ => Ok(computed),
        }
    }

    async fn manifest(
        &self,
        method: Method,
        url: &Url,
        auth: Option<&HeaderValue>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut request = self
            .client
            .request(method.clone(), url.clone())
            .header(ACCEPT, MANIFEST_TYPES);
        if let Some(auth) = auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        request
            .send()
            .await
            .with_context(|| format!("{method} {url} failed"))
    }

    /// Turns the statuses that end the attempt into errors; lets success and "try GET" through.
    fn check_status(&self, status: StatusCode, where_: &str) -> anyhow::Result<()> {
        match status {
            StatusCode::NOT_FOUND => bail!("the registry has no manifest for {where_} (HTTP 404)"),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => match &self.token {
                Some(_) => bail!(
                    "the registry refused the token from --token-file for {where_} (HTTP {status})"
                ),
                None => bail!(
                    "the registry requires credentials for {where_} (HTTP {status}): pass --token-file <file>"
                ),
            },
            _ => Ok(()),
        }
    }

    /// The anonymous half of the registry token protocol: ask the challenge's realm for a pull
    /// token. Only used without `--token-file`, so the user's token never goes to a realm the
    /// registry names.
    async fn anonymous_token(
        &self,
        challenge: &BearerChallenge,
        image: &ImageRef,
    ) -> anyhow::Result<HeaderValue> {
        let mut realm = Url::parse(&challenge.realm).with_context(|| {
            format!(
                "the registry's token realm `{}` is not a URL",
                challenge.realm
            )
        })?;
        if !matches!(realm.scheme(), "http" | "https") {
            bail!(
                "the registry's token realm `{}` is not http(s)",
                challenge.realm
            );
        }
        let scope = challenge
            .scope
            .clone()
            .unwrap_or_else(|| format!("repository:{}:pull", image.repository()));
        {
            let mut query = realm.query_pairs_mut();
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let response = self
            .client
            .get(realm.clone())
            .send()
            .await
            .with_context(|| format!("asking {} for an anonymous pull token", challenge.realm))?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "the token service {} refused an anonymous token for `{scope}` (HTTP {status}): pass --token-file <file>",
                challenge.realm
            );
        }
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            token: Option<String>,
            access_token: Option<String>,
        }
        let body: TokenResponse = response
            .json()
            .await
            .with_context(|| format!("the token service {} sent no JSON token", challenge.realm))?;
        let Some(token) = body.token.or(body.access_token).filter(|t| !t.is_empty()) else {
            bail!("the token service {} sent no token", challenge.realm);
        };
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            bail!(
                "the token service {} sent a token that cannot go in an HTTP header",
                challenge.realm
            );
        }
        Ok(bearer_header(&token))
    }
}

/// The `Docker-Content-Digest` header, checked against the digest grammar: a malformed one is
/// an error rather than something to print for CI to deploy.
fn reported_digest(headers: &HeaderMap) -> anyhow::Result<Option<String>> {
    let Some(value) = headers.get("docker-content-digest") else {
        return Ok(None);
    };
    let digest = value
        .to_str()
        .context("the registry sent a Docker-Content-Digest header that is not text")?
        .trim();
    validate_digest(digest).map_err(|reason| {
        anyhow::anyhow!("the registry sent a bad Docker-Content-Digest: {reason}")
    })?;
    Ok(Some(digest.to_string()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `WWW-Authenticate: Bearer realm="…",service="…",scope="…"`.
#[derive(Debug, PartialEq, Eq)]
struct BearerChallenge {
    realm: String,
    service: Option<String>,
    scope: Option<String>,
}

impl BearerChallenge {
    fn from_headers(headers: &HeaderMap) -> Option<BearerChallenge> {
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(BearerChallenge::parse)
    }

    fn parse(header: &str) -> Option<BearerChallenge> {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = auth_params(params);
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        Some(BearerChallenge {
            realm: get("realm")?,
            service: get("service"),
            scope: get("scope"),
        })
    }
}

/// `key=value` pairs separated by commas; values may be quoted, and quoted values may hold
/// commas (`scope="repository:a:pull,push"`) and backslash escapes (RFC 9110 §11.2).
fn auth_params(input: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = input.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ',')).collect();
        if key.is_empty() {
            break;
        }
        if chars.next_if_eq(&'=').is_none() {
            continue;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| *c != ',')));
            value = value.trim().to_string();
        }
        out.push((key.trim().to_string(), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_api_is_on_registry_1() {
        let hub = ImageRef::parse("nginx:1.27").unwrap();
        assert_eq!(api_host(hub.registry()), "registry-1.docker.io");
        let local = ImageRef::parse("localhost:5000/app").unwrap();
        assert_eq!(api_host(local.registry()), "localhost:5000");
    }

    #[test]
    fn bearer_challenge_with_quoted_commas() {
        let c = BearerChallenge::parse(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull,push""#,
        )
        .unwrap();
        assert_eq!(
            c,
            BearerChallenge {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/nginx:pull,push".into()),
            }
        );
        let bare = BearerChallenge::parse("bearer realm=http://h/token, service=s").unwrap();
        assert_eq!(bare.realm, "http://h/token");
        assert_eq!(bare.service.as_deref(), Some("s"));
        assert_eq!(bare.scope, None);
        assert_eq!(BearerChallenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(BearerChallenge::parse(r#"Bearer service="x""#), None);
        let escaped = BearerChallenge::parse(r#"Bearer realm="a\"b""#).unwrap();
        assert_eq!(escaped.realm, "a\"b");
    }

    #[test]
    fn token_debug_is_redacted() {
        let token = BearerToken("very-secret".into());
        assert!(!format!("{token:?}").contains("very-secret"));
        assert!(token.header().is_sensitive());
    }

    #[test]
    fn reported_digest_is_validated() {
        let mut headers = HeaderMap::new();
        assert_eq!(reported_digest(&headers).unwrap(), None);
        headers.insert(
            "docker-content-digest",
            HeaderValue::from_static("sha256:abc"),
        );
        assert!(reported_digest(&headers).is_err());
        let good = format!("sha256:{}", "a".repeat(64));
        headers.insert(
            "docker-content-digest",
            HeaderValue::from_str(&good).unwrap(),
        );
        assert_eq!(reported_digest(&headers).unwrap(), Some(good));
    }
}
