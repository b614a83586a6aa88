//! `greenlight guard image`: the dispatch-time mutable-tag guard and, with `--resolve`,
//! pinning a tag to the digest the registry serves for it.
//!
//! Owns the command line and what is printed. Parsing and judging references is
//! `greenlight_core::image`'s job, the registry exchange `greenlight_registry`'s, and the
//! config file and token file are read by the readers every command shares (`super`).
//! Must never: put the registry token in process arguments, logs or error messages (it is read
//! from a file and handed to the registry client), or print anything on stdout but pinned
//! references, so CI can capture them.

use anyhow::Context;
use clap::{Args, Subcommand};
use greenlight_core::image::{ImageRef, TagPolicy, TagVerdict};
use greenlight_registry::{BearerToken, ClientOptions, RegistryClient};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct GuardArgs {
    #[command(subcommand)]
    pub command: GuardCommand,
}

#[derive(Subcommand)]
pub enum GuardCommand {
    /// Reject image references whose tag can move (latest, main, master, stable, edge, any tag
    /// naming no version such as alpine or 3.12-latest, none).
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

    /// Config file whose `[lint]` and `[guard]` `mutable-tags = [...]` add mutable tags and
    /// whose `[lint] immutable-tags` declares tags never pushed twice
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

    /// Give up on a registry request after this long: 90 (seconds), 30s, 1m30s, …
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
        .with_extra(args.mutable.iter().map(String::as_str))
        .with_immutable(config.lint.immutable_tags.iter().map(String::as_str));

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
        let token = args.token_file.as_deref().map(read_token).transpose()?;
        return resolve_all(&images, &policy, &args, timeout, token);
    }

    let mut rejected = 0;
    for image in &images {
        let verdict = policy.judge(image);
        match (verdict.problem(image), verdict.fix(image)) {
            (Some(problem), Some(fix)) => {
                rejected += 1;
                errln!("error: {problem}\n  fix: {fix}");
            }
            _ => errln!(
                "ok: `{}` {}",
                image.as_str(),
                why_acceptable(&verdict, image)
            ),
        }
    }
    if rejected > 0 {
        errln!(
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
    crate::install_crypto();
    let registry = RegistryClient::new(ClientOptions {
        plain_http: args.plain_http,
        timeout,
        token,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    let mut failed = 0;
    for image in images {
        if image.digest().is_some() {
            // It already names exactly one manifest; asking the registry adds nothing.
            outln!("{}", image.as_str());
            errln!("ok: `{}` is already pinned by digest", image.as_str());
            continue;
        }
        match runtime.block_on(registry.resolve(image)) {
            Ok(digest) => {
                outln!("{}", image.pinned_to(&digest));
                if let Some(problem) = policy.judge(image).problem(image) {
                    errln!(
                        "note: {problem}; dispatch the pinned reference printed on stdout, not the tag"
                    );
                }
            }
            Err(err) => {
                failed += 1;
                let hint = if err.needs_credentials() {
                    ": pass --token-file <file>"
                } else {
                    ""
                };
                // `{:#}` through anyhow prints the causes too ("connection refused").
                let err = anyhow::Error::new(err);
                errln!("error: cannot resolve `{}`: {err:#}{hint}", image.as_str());
            }
        }
    }
    if failed > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The registry token: read by the shared token-file reader, then checked to fit in a header.
/// Both errors name the flag and the file, never the contents.
fn read_token(path: &Path) -> anyhow::Result<BearerToken> {
    let secret = super::secret_file("--token-file", path)?;
    BearerToken::new(secret.expose(), format!("--token-file {}", path.display()))
        .map_err(|e| super::usage(e.to_string()))
}
