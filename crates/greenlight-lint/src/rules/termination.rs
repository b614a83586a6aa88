//! GL101 (preStop sleep vs the termination grace period) and GL102 (a preStop sleep is a
//! stopgap).
//! Must never: count a probe-level `terminationGracePeriodSeconds` as the pod's grace period —
//! it applies only when a failing probe kills the container.

use super::{Check, Docs, Emit, Rule, entry_span, parse_sleep_duration, secs};
use crate::diagnostic::Severity;
use crate::fix::Edit;
use crate::object::{Container, Workload};
use crate::yaml::{Node, Span};

const DEFAULT_GRACE: i64 = 30;

pub const PRESTOP_EXCEEDS_GRACE: Rule = Rule {
    id: "GL101",
    name: "prestop-sleep-exceeds-grace-period",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A preStop sleep as long as the termination grace period is cut short by SIGKILL",
    docs: Docs {
        what: "Flags a container — a regular one, or a native sidecar (an init container with \
               `restartPolicy: Always`) — whose preStop hook sleeps at least as long as the pod's \
               `terminationGracePeriodSeconds` (30 s when unset). Recognized: `exec` \
               `[\"sleep\", \"N\"]`, `sleep 5s` / `1m` units, shell scripts (`sh -c \"sleep 30 && \
               nginx -s quit\"`, also `sh -c -- \"…\"`, several sleeps add up), `sleep infinity`, \
               and the built-in \
               `lifecycle.preStop.sleep.seconds`. A probe-level `terminationGracePeriodSeconds` \
               is ignored: it applies only to kills by a failing probe.",
        why: "The grace period is the whole budget for the preStop hook and the SIGTERM shutdown \
              together. When it runs out the kubelet kills the container whatever the hook is \
              doing, so the drain you meant to wait for is cut off, the application never gets \
              SIGTERM in time, and in-flight requests fail on every rollout. The built-in sleep \
              action is worse: the API server rejects a `sleep.seconds` longer than the grace \
              period, so the sync fails (an equal one is accepted and eats the whole period).",
        example: "spec:\n  terminationGracePeriodSeconds: 10\n  containers:\n  - name: admin\n    \
                  lifecycle:\n      preStop:\n        exec:\n          command: [\"/bin/sh\", \"-c\", \"sleep 45\"]\n",
        fix: "Set `terminationGracePeriodSeconds` to the sleep plus the time the application \
              needs after SIGTERM (e.g. sleep 45 → grace 60), or shorten the sleep.",
    },
    check: Check::Workload(check_exceeds),
};

pub const PRESTOP_STOPGAP: Rule = Rule {
    id: "GL102",
    name: "prestop-sleep-stopgap",
    severity: Severity::Info,
    default_enabled: true,
    summary: "A fixed preStop sleep stands in for SIGTERM handling",
    docs: Docs {
        what: "Notes every preStop hook that waits with a fixed `sleep` (exec or the built-in \
               sleep action).",
        why: "The sleep gives endpoint removal time to propagate before the process stops, a \
              guess at how long that takes. An application that handles SIGTERM (stop accepting, \
              finish in-flight requests, exit) drains exactly as long as it needs; the sleep is \
              a stopgap until it does.",
        example: "lifecycle:\n  preStop:\n    exec:\n      command: [\"sleep\", \"15\"]\n",
        fix: "Handle SIGTERM in the application, then shorten or remove the sleep. Keep the grace \
              period above the sleep plus the shutdown time while both exist.",
    },
    check: Check::Workload(check_stopgap),
};

/// A sleep found in a preStop hook.
struct Sleep<'a> {
    seconds: f64,
    /// The node holding the sleep (the command element or `sleep.seconds`).
    node: &'a Node,
    field: String,
    native: bool,
}

fn prestop_sleep<'a>(c: &Container<'a>) -> Option<Sleep<'a>> {
    let pre = c.node.at(&["lifecycle", "preStop"])?;
    if let Some(secs_node) = pre.at(&["sleep", "seconds"]) {
        return Some(Sleep {
            seconds: secs_node.as_i64()? as f64,
            node: secs_node,
            field: format!("{}.lifecycle.preStop.sleep.seconds", c.path),
            native: true,
        });
    }
    let cmd = pre.at(&["exec", "command"])?;
    let argv: Vec<&Node> = cmd.as_seq().iter().collect();
    let words: Vec<&str> = argv.iter().filter_map(|n| n.as_str()).collect();
    if words.len() != argv.len() || words.is_empty() {
        return None;
    }
    let field = format!("{}.lifecycle.preStop.exec.command", c.path);
    let prog = words[0].rsplit('/').next().unwrap_or("");
    if prog == "sleep" {
        let total = words[1..]
            .iter()
            .map(|w| parse_sleep_duration(w))
            .sum::<Option<f64>>()?;
        if words.len() < 2 {
            return None;
        }
        let at = if argv.len() == 2 { 1 } else { 0 };
        return Some(Sleep {
            seconds: total,
            node: argv[at],
            field: format!("{field}[{at}]"),
            native: false,
        });
    }
    // A shell running a script: `sh -c "…"`, `bash -ec "…"`, `busybox sh -c "…"`.
    let shell_at = usize::from(prog == "busybox");
    let shell = words.get(shell_at)?.rsplit('/').next().unwrap_or("");
    if !matches!(shell, "sh" | "bash" | "ash" | "dash" | "zsh" | "ksh") {
        return None;
    }
    let c_flag = words
        .iter()
        .enumerate()
        .skip(shell_at + 1)
        .find(|(_, w)| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))?
        .0;
    // `sh -c -- "sleep 5"`: `--` ends the options; the script follows it.
    let script_at = match words.get(c_flag + 1) {
        Some(&"--") => c_flag + 2,
        _ => c_flag + 1,
    };
    let script = words.get(script_at)?;
    let seconds = script_sleep(script)?;
    Some(Sleep {
        seconds,
        node: argv[script_at],
        field: format!("{field}[{script_at}]"),
        native: false,
    })
}

/// Total seconds slept by `sleep` commands in a shell script; `None` when it has none we can read.
fn script_sleep(script: &str) -> Option<f64> {
    let tokens: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '{' | '}'))
        .filter(|t| !t.is_empty())
        .collect();
    let mut total = 0.0;
    let mut found = false;
    for (i, t) in tokens.iter().enumerate() {
        if t.rsplit('/').next() == Some("sleep") {
            let mut j = i + 1;
            while let Some(v) = tokens.get(j).and_then(|t| parse_sleep_duration(t)) {
                total += v;
                found = true;
                j += 1;
            }
        }
    }
    found.then_some(total)
}

/// The pod's grace period and the node that sets it (absent: the 30 s default).
fn grace_period<'a>(w: &Workload<'a, '_>) -> (i64, Option<&'a Node>) {
    match w.pod.get("terminationGracePeriodSeconds") {
        Some(n) => (n.as_i64().unwrap_or(DEFAULT_GRACE), Some(n)),
        None => (DEFAULT_GRACE, None),
    }
}

fn check_exceeds(w: &Workload, emit: &mut Emit) {
    let (grace, grace_node) = grace_period(w);
    for c in w.stopped_containers() {
        let Some(sleep) = prestop_sleep(&c) else {
            continue;
        };
        if sleep.seconds < grace as f64 {
            continue;
        }
        let s = match secs(sleep.seconds) {
            f if sleep.seconds.is_infinite() => f,
            n => format!("{n}s"),
        };
        let grace_src = if grace_node.is_some() {
            ""
        } else {
            " (the default: terminationGracePeriodSeconds is unset)"
        };
        // The API server rejects a built-in sleep only when it is longer than the grace period
        // (`validateSleepAction`: `seconds > gracePeriod`); an equal one is accepted and then
        // takes the whole grace period like an exec sleep.
        let message = if sleep.native && sleep.seconds > grace as f64 {
            format!(
                "container `{}`: the built-in preStop sleep of {s} is longer than the grace period of {grace}s{grace_src}; \
                 the API server rejects it (sleep.seconds may not exceed terminationGracePeriodSeconds), so the sync will fail",
                c.name
            )
        } else {
            format!(
                "container `{}`: preStop sleeps {s} but the grace period is {grace}s{grace_src}; the hook really gets {grace}s \
                 (plus a one-off 2s extension) before the container is killed, and the application never gets to shut down",
                c.name
            )
        };
        let fix = if sleep.seconds.is_infinite() {
            format!(
                "replace `sleep infinity` with a bounded sleep shorter than {grace}s, or handle SIGTERM instead"
            )
        } else {
            let margin = (sleep.seconds.ceil() as i64).saturating_add(15);
            format!(
                "set `{}.terminationGracePeriodSeconds` to at least the sleep plus the shutdown time (e.g. {margin}), or shorten the sleep below {grace}s",
                w.pod_path
            )
        };
        let span = value_span(sleep.node);
        let f = emit.at(w.object, span, &sleep.field, message);
        f.fix(fix);
        // `--fix`: the grace period raised to the value the fix names.
        if sleep.seconds.is_finite() {
            let margin = (sleep.seconds.ceil() as i64).saturating_add(15);
            let edit = match grace_node {
                Some(g) => Some(Edit::Scalar {
                    span: g.span,
                    value: margin.to_string(),
                }),
                None => w.pod.as_map().first().map(|e| Edit::Keys {
                    at: e.key.span.start,
                    lines: vec![format!("terminationGracePeriodSeconds: {margin}")],
                }),
            };
            if let Some(edit) = edit {
                f.edit(edit, margin);
            }
        }
        if let Some(g) = grace_node {
            let gspan = entry_span(w.pod, "terminationGracePeriodSeconds").unwrap_or(g.span);
            f.related(
                w.object,
                gspan,
                format!("terminationGracePeriodSeconds is {grace}"),
            );
        }
    }
}

fn check_stopgap(w: &Workload, emit: &mut Emit) {
    for c in w.stopped_containers() {
        let Some(sleep) = prestop_sleep(&c) else {
            continue;
        };
        emit.at(
            w.object,
            value_span(sleep.node),
            &sleep.field,
            format!(
                "container `{}`: a fixed {} preStop sleep is a stopgap for handling SIGTERM in the application",
                c.name,
                match secs(sleep.seconds) {
                    f if sleep.seconds.is_infinite() => format!("(`{f}`)"),
                    n => format!("{n}s"),
                }
            ),
        )
        .fix("handle SIGTERM (stop accepting, drain in-flight requests, exit), then shorten or remove the sleep");
    }
}

fn value_span(n: &Node) -> Span {
    n.span
}

#[cfg(test)]
mod tests {
    use super::script_sleep;

    #[test]
    fn shell_scripts() {
        assert_eq!(script_sleep("sleep 30 && nginx -s quit"), Some(30.0));
        assert_eq!(script_sleep("sleep 5s; /bin/sleep 1m"), Some(65.0));
        assert_eq!(script_sleep("sleep $DELAY"), None);
        assert_eq!(script_sleep("nginx -s quit"), None);
    }
}
