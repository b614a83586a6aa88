//! The greenlight binary: a thin command-line layer over the library crates.
//! Each subcommand lives in `cmd/<name>.rs` and returns the process exit code; this file only
//! parses arguments and maps errors to exit codes (0 ok, 1 the failure a command exists to
//! report, 2 usage or configuration error).

mod cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
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
    Watch(Box<cmd::watch::WatchArgs>),
    /// Show the watchdog's state: watches, verdicts, the breaker.
    Status(cmd::status::StatusArgs),
    /// The circuit breaker that stops reverts after two that no confirmation of their apps cleared.
    Breaker(cmd::status::BreakerArgs),
    /// Move the watchdog's state between stores: `export` writes it as one JSON document, `import` reads one into a new store.
    State(cmd::state::StateArgs),
    /// Commit-message trailer tools (a commit-msg hook).
    Trailer(cmd::trailer::TrailerArgs),
    /// A local Argo CD stand-in that syncs a git repository and serves the Argo CD REST API.
    Sandbox(Box<cmd::sandbox::SandboxArgs>),
    /// Lint Kubernetes manifests, CI pipelines and deploy scripts for rollout safety.
    Lint(cmd::lint::LintArgs),
    /// List every lint rule.
    Rules(cmd::lint::RulesArgs),
    /// Print the documentation of one lint rule.
    Explain(cmd::lint::ExplainArgs),
    /// Dispatch-time guards (mutable image tags).
    Guard(cmd::guard::GuardArgs),
    /// The verified promotion gate: `plan` a config, `run` or `self-test` the gate, `gc` expired candidates, `prune-survey` before prune.
    Promote(cmd::promote::PromoteArgs),
    /// Does the cluster run the digest git pins? Each container's pinned digest against the imageID of its workload's Pods (exit 0 all; 1 some or none; 2 a tag).
    Verify(cmd::verify::VerifyArgs),
    /// Wait until a commit is live on an Argo CD Application: reached, healthy, and stable for a window (exit 0; 1 not live, 3 unobserved).
    Wait(cmd::wait::WaitArgs),
    /// Survey the fleet: which Applications a commit's watch can judge, and which may be armed (Image Updater, prune, sync policy, app-of-apps).
    Audit(cmd::audit::AuditArgs),
    /// The shadow track record: each app's verdicts against what people did in git the day after (agreement, fix forward, misses, false alarms), and whether there are enough to arm.
    Record(cmd::record::RecordArgs),
    /// Why a commit's verdict came out so: each watch's timeline in words, and its recorded judge inputs replayed through this greenlight's judge (exit 0 same verdict; 3 judged otherwise).
    Why(cmd::why::WhyArgs),
    /// Notifications: `test` a config's sinks with a sample, list a daemon's `dead-letters`.
    Notify(cmd::notify::NotifyArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(cmd::completions::CompletionsArgs),
    /// Print the manual page (roff, section 1) to stdout: `greenlight man > greenlight.1`.
    Man,
}

/// reqwest's TLS needs a process-wide crypto provider; ring is the one compiled in.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `argv` parsed, with the environment and the config file under the flags of the commands
/// that take them (`cmd/config.rs`); clap's errors exit as clap exits them.
fn parse(argv: &[OsString]) -> Result<(Cli, Option<cmd::config::ConfigFile>), ExitCode> {
    let env = |k: &str| std::env::var_os(k);
    let resolved = match cmd::config::resolve(&Cli::command(), argv, &env) {
        Ok(r) => r,
        Err(cmd::config::Refusal::Clap(e)) => e.exit(),
        Err(refusal) => {
            greenlight::output::stderr_line(&format!("error: {refusal}"));
            return Err(ExitCode::from(2));
        }
    };
    let cli = Cli::from_arg_matches(&resolved.matches).unwrap_or_else(|e| e.exit());
    Ok((cli, resolved.config))
}

/// How `watch` checks a changed config file before it re-executes: the same command line and
/// environment, with the file's new text.
fn config_check(argv: &[OsString]) -> greenlight::reexec::ConfigCheck {
    let argv = argv.to_vec();
    Box::new(move |text: &str| {
        let env = |k: &str| std::env::var_os(k);
        let text = text.to_string();
        let read = move |_: &std::path::Path| Ok(text.clone());
        let resolved = cmd::config::resolve_with(&Cli::command(), &argv, &env, &read)
            .map_err(|e| e.to_string())?;
        let cli = Cli::from_arg_matches(&resolved.matches).map_err(|e| e.to_string())?;
        match cli.command {
            // What the new process would refuse at start (a token file gone, …).
            Command::Watch(a) => cmd::watch::config_from(&a)
                .map(|_| ())
                .map_err(|e| format!("{e:#}")),
            _ => Ok(()),
        }
    })
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let (cli, config) = match parse(&argv) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Watch(a) => cmd::watch::run(
            *a,
            cmd::watch::Relaunch {
                check: config_check(&argv),
                argv,
                config,
            },
        ),
        Command::Status(a) => cmd::status::run(a),
        Command::Breaker(a) => cmd::status::run_breaker(a),
        Command::State(a) => cmd::state::run(a),
        Command::Trailer(a) => cmd::trailer::run(a),
        Command::Sandbox(a) => cmd::sandbox::run(*a),
        Command::Lint(a) => cmd::lint::run_lint(a),
        Command::Rules(a) => cmd::lint::run_rules(a),
        Command::Explain(a) => cmd::lint::run_explain(a),
        Command::Guard(a) => cmd::guard::run(a),
        Command::Promote(a) => cmd::promote::run(a),
        Command::Wait(a) => cmd::wait::run(a),
        Command::Audit(a) => cmd::audit::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Why(a) => cmd::why::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Notify(a) => cmd::notify::run(a),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/configuration.md's table of keys is the command's: each key of `watch`, with its
    /// variable, and nothing else.
    #[test]
    fn the_documented_keys_are_the_flags_of_watch() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/configuration.md"
        ))
        .unwrap();
        let documented: Vec<(String, String)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let key = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                let var = cells.get(2)?.strip_prefix('`')?.split('`').next()?;
                var.starts_with(cmd::config::ENV_PREFIX)
                    .then(|| (key.to_string(), var.to_string()))
            })
            .collect();
        let cli = Cli::command();
        let watch = cli.find_subcommand("watch").unwrap();
        let keys: Vec<(String, String)> = cmd::config::keys(watch)
            .map(|a| {
                let long = a.get_long().unwrap();
                (long.to_string(), cmd::config::env_name(long))
            })
            .collect();
        assert_eq!(documented, keys);
    }
}
