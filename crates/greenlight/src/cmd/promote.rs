//! `greenlight promote plan --config <file>`: reads a promotion config (and the Argo Rollouts
//! AnalysisTemplates it imports), and prints what the gate would do: the live workload, the
//! candidate, the promotion commit's watch trailer, then the checks in the order they run, each
//! with its worst-case duration, and the total. A slower check before a faster one is a warning
//! on stderr. Exit 0 for a valid config (warnings included), 2 for a usage or configuration
//! error, each problem on its own line naming the file, line, column and field.
//!
//! Must never: touch git, Argo CD or the cluster (`plan` reads the config's files only).
//! `promote run` and `promote self-test` live in `promote_run.rs`, `promote gc` in `promote_gc.rs`,
//! `promote prune-survey` in `promote_prune.rs`.

use anyhow::Result;
use clap::{Args, Subcommand};
use greenlight::promote::candidates;
use greenlight::promote::{self, LoadError};
use greenlight_gate::config::plan::{CheckPlan, MetricBound, Plan, compact_duration, plan};
use greenlight_gate::config::{AnalysisOrigin, CheckKind, Promotion, ShortDeadline};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct PromoteArgs {
    #[command(subcommand)]
    pub action: PromoteAction,
}

#[derive(Subcommand)]
pub enum PromoteAction {
    /// Check a promotion config and print its checks in order, each with its worst-case duration, and the total.
    Plan(PlanArgs),
    /// Run the gate: the candidate, its judgement, the checks in order, then one promotion commit (or the candidate kept).
    Run(super::promote_run::RunArgs),
    /// Run the gate on a candidate made to fail (its image does not exist): exit 0 only when the gate blocks it; never promotes.
    SelfTest(super::promote_run::SelfTestArgs),
    /// Remove the kept candidates whose kept-until has passed, in one commit (none expired: no commit).
    Gc(super::promote_gc::GcArgs),
    /// List what Argo CD would delete if prune were on for the candidates' Application, by a dry-run sync with prune (applies and deletes nothing).
    PruneSurvey(super::promote_prune::PruneSurveyArgs),
}

#[derive(Args)]
pub struct PlanArgs {
    /// The promotion config (promote.yaml; docs/promote.md).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

pub fn run(a: PromoteArgs) -> Result<ExitCode> {
    let args = match a.action {
        PromoteAction::Plan(args) => args,
        PromoteAction::Run(args) => return super::promote_run::run(args),
        PromoteAction::SelfTest(args) => return super::promote_run::self_test(args),
        PromoteAction::Gc(args) => return super::promote_gc::gc(args),
        PromoteAction::PruneSurvey(args) => return super::promote_prune::prune_survey(args),
    };
    let file = args.config.display().to_string();
    let promotion = match promote::load(&args.config) {
        Ok(p) => p,
        Err(e @ LoadError::Read { .. }) => return Err(super::usage(e.to_string())),
        Err(LoadError::Invalid(problems)) => {
            for p in &problems {
                errln!("error: {p}");
            }
            errln!(
                "error: {file}: {} problem(s); nothing was planned",
                problems.len()
            );
            return Ok(ExitCode::from(2));
        }
    };
    let plan = plan(&promotion);
    print_plan(&file, &promotion, &plan)?;
    for w in &plan.warnings {
        let faster = &plan.checks[w.check];
        let slower: Vec<String> = w
            .slower_before
            .iter()
            .map(|&i| {
                let c = &plan.checks[i];
                format!("`{}` ({})", c.name, compact_duration(c.worst_ms))
            })
            .collect();
        errln!(
            "warning: {file}: check `{}` (worst case {}) runs after the slower {} {}: the gate stops at the first check that does not pass, so faster checks belong first",
            faster.name,
            compact_duration(faster.worst_ms),
            if slower.len() == 1 { "check" } else { "checks" },
            slower.join(", ")
        );
    }
    // A candidate may take up to `run`'s --candidate-deadline (10m by default) to become
    // healthy; the promotion's watch deadline must then cover that plus margin.
    let watch = &promotion.commit.watch;
    let could_need = greenlight_gate::machine::required_deadline_ms(600_000);
    if watch.deadline_ms < could_need {
        let then = match watch.short_deadline {
            ShortDeadline::Raise => {
                "a run then raises it in the promotion's trailer and says so (`shortDeadline: raise`)"
            }
            ShortDeadline::Refuse => "a run then blocks the promotion (`shortDeadline: refuse`)",
        };
        errln!(
            "warning: {file}: promotion.watch.deadline {} could be shorter than the candidate's time to healthy plus half of it ({} for a candidate that takes `run`'s default --candidate-deadline, 10m): {then}",
            compact_duration(watch.deadline_ms),
            compact_duration(could_need)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_plan(file: &str, p: &Promotion, plan: &Plan) -> Result<()> {
    let live = &p.live;
    let w = &live.workload;
    let workload = match &w.namespace {
        Some(ns) => format!("{ns}/{}", w.name),
        None => w.name.clone(),
    };
    let c = &p.candidate;
    outln!("{file}: a valid promotion config");
    outln!(
        "  live       {} {workload}, container `{}`, in {} (Application {})",
        w.kind.as_str(),
        w.container,
        live.manifest,
        live.app
    );
    outln!(
        "  candidate  {} replica(s) behind Service {}.{} port {}, manifests in {}/ (Application {}, which must prune automatically)",
        c.replicas,
        c.service,
        c.namespace,
        c.port,
        c.path,
        c.app
    );
    let lands = match &p.commit.landing {
        greenlight_gate::config::Landing::Push => "pushed to the branch".to_string(),
        greenlight_gate::config::Landing::PullRequest(pr) => format!(
            "proposed by pull request on {}{}",
            pr.forge,
            if pr.auto_merge {
                ", auto-merged once the forge's required checks pass"
            } else {
                ", merged by a human"
            }
        ),
    };
    outln!(
        "  promotion  a commit with the trailer `{}: {}`, {lands}",
        p.commit.watch.key,
        p.watch_directive().render()
    );
    outln!(
        "  retention  a failed candidate is kept {}",
        compact_duration(p.retention.failed_ms)
    );
    outln!("");
    outln!("checks, in the order they run (the gate stops at the first that does not pass):");
    let name_w = plan.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let kind_w = plan.checks.iter().map(|c| c.kind.len()).max().unwrap_or(0);
    let worst_w = plan
        .checks
        .iter()
        .map(|c| compact_duration(c.worst_ms).len())
        .max()
        .unwrap_or(0);
    for (i, (check, cp)) in p.checks.iter().zip(&plan.checks).enumerate() {
        outln!(
            "  {:>2}. {:<name_w$}  {:<kind_w$}  {:>worst_w$}  {}",
            i + 1,
            cp.name,
            cp.kind,
            compact_duration(cp.worst_ms),
            what(&check.kind)
        );
        for line in metric_lines(&check.kind, cp) {
            outln!("      {line}");
        }
    }
    outln!(
        "total worst case: {} ({} check(s) one after another; the wait for the candidate to become healthy comes first and is not counted)",
        compact_duration(plan.total_ms),
        plan.checks.len()
    );
    // The run's lock outlives the run's worst case (docs/promote.md#cancel); said with `run`'s
    // default timings, which its flags change.
    let ttl = candidates::lock_ttl_ms(600_000, 300_000, 30_000, plan.total_ms);
    outln!(
        "lock: a run holds {} for at most {} with `run`'s default timings (the candidate's deadline 10m, its judge's margins 6m, the checks' worst case, 10m for its commits); a run stopped by a signal releases it at once, one killed outright leaves it until then",
        candidates::lock_path(&c.path, &w.name),
        compact_duration(ttl)
    );
    Ok(())
}

/// What a check does, in a line.
fn what(kind: &CheckKind) -> String {
    match kind {
        CheckKind::Http(h) => {
            let body = match &h.body_contains {
                Some(text) => format!(" and a body containing {text:?}"),
                None => String::new(),
            };
            format!("GET {} expecting {}{body}", h.url, h.status)
        }
        CheckKind::Command(c) => {
            let argv: Vec<&str> = c.argv.iter().map(|t| t.as_str()).collect();
            format!("runs {:?}, passing on exit 0", argv)
        }
        CheckKind::Analysis(a) => match &a.origin {
            AnalysisOrigin::Inline => a.metrics.first().map_or(String::new(), |m| {
                format!("{} measurement(s) of {}", m.count, m.prometheus.address)
            }),
            AnalysisOrigin::Template { file, kind, name } => format!(
                "{kind} `{name}` ({file}): {} metric(s), measured together",
                a.metrics.len()
            ),
        },
    }
}

/// The arithmetic of each metric's worst case.
fn metric_lines(kind: &CheckKind, cp: &CheckPlan) -> Vec<String> {
    let CheckKind::Analysis(a) = kind else {
        return Vec::new();
    };
    let named = matches!(a.origin, AnalysisOrigin::Template { .. });
    cp.metrics
        .iter()
        .map(|m| {
            let sum = bound_terms(&m.bound);
            if named {
                format!(
                    "metric `{}`: {} = {sum}",
                    m.name,
                    compact_duration(m.bound.total_ms)
                )
            } else {
                format!("= {sum}")
            }
        })
        .collect()
}

fn bound_terms(b: &MetricBound) -> String {
    let d = compact_duration;
    let mut terms = Vec::new();
    if b.initial_delay_ms > 0 {
        terms.push(format!("{} initialDelay", d(b.initial_delay_ms)));
    }
    terms.push(format!(
        "{} × {} query timeout",
        b.measurements,
        d(b.query_timeout_ms)
    ));
    if b.intervals > 0 {
        terms.push(format!("{} × {} interval", b.intervals, d(b.interval_ms)));
    }
    if b.error_retries > 0 {
        terms.push(format!(
            "{} error retries × ({} + {} retry wait)",
            b.error_retries,
            d(b.query_timeout_ms),
            d(greenlight_gate::config::ERROR_RETRY_INTERVAL_MS)
        ));
    }
    terms.join(" + ")
}
