//! The greenlight binary: a thin command-line layer over the library crates.
//! Each subcommand lives in `cmd/<name>.rs` and returns the process exit code; this file only
//! parses arguments and maps errors to exit codes (0 ok, 1 the failure a command exists to
//! report, 2 usage or configuration error).

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// `greenlight --version`: the package version and the commit it was built from (`build.rs`):
/// `0.1.0 (1a2b3c4d5e6f 2026-12-04)`, or `0.1.0 (unknown)` outside a git checkout.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("GREENLIGHT_BUILD_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "greenlight",
    version = VERSION,
    about = "Make a GitOps deployment's green light mean what people think it means"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tell the canary story end to end in a temporary directory: real git, a local Argo CD stand-in, a revert (`demo promote`: the promotion gate's story).
    Demo(cmd::demo::DemoArgs),
    /// Watch commits that opt in with a trailer; judge reach, health and stability; revert in arm mode.
    Watch(cmd::watch::WatchArgs),
    /// Show the watchdog's state: watches, verdicts, the breaker.
    Status(cmd::status::StatusArgs),
    /// The circuit breaker that stops reverts after two that no confirmation of their apps cleared.
    Breaker(cmd::status::BreakerArgs),
    /// Commit-message trailer tools (a commit-msg hook).
    Trailer(cmd::trailer::TrailerArgs),
    /// A local Argo CD stand-in that syncs a git repository and serves the Argo CD REST API.
    Sandbox(cmd::sandbox::SandboxArgs),
    /// Lint Kubernetes manifests, CI pipelines and deploy scripts for rollout safety.
    Lint(cmd::lint::LintArgs),
    /// List every lint rule.
    Rules(cmd::lint::RulesArgs),
    /// Print the documentation of one lint rule.
    Explain(cmd::lint::ExplainArgs),
    /// Dispatch-time guards (mutable image tags).
    Guard(cmd::guard::GuardArgs),
    /// The verified promotion gate: `plan` checks a promotion config and shows what its checks cost.
    Promote(cmd::promote::PromoteArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(cmd::completions::CompletionsArgs),
    /// Print the manual page (roff, section 1) to stdout: `greenlight man > greenlight.1`.
    Man,
}

/// reqwest's TLS needs a process-wide crypto provider; ring is the one compiled in.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Breaker(a) => cmd::status::run_breaker(a),
        Command::Trailer(a) => cmd::trailer::run(a),
        Command::Sandbox(a) => cmd::sandbox::run(a),
        Command::Lint(a) => cmd::lint::run_lint(a),
        Command::Rules(a) => cmd::lint::run_rules(a),
        Command::Explain(a) => cmd::lint::run_explain(a),
        Command::Guard(a) => cmd::guard::run(a),
        Command::Promote(a) => cmd::promote::run(a),
        Command::Completions(a) => cmd::completions::run_completions(a),
        Command::Man => cmd::completions::run_man(),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            greenlight::output::stderr_line(&format!("error: {err:#}"));
            ExitCode::from(cmd::exit_code_of(&err))
        }
    }
}
