//! GL201 (a large fixed `initialDelaySeconds` instead of a startupProbe) and GL202 (liveness
//! and readiness probing the same endpoint).
//! Must never: flag GL202 when liveness is at least twice as slow to kill as readiness is to mark
//! unready — the Kubernetes docs recommend exactly that setup (kube-score#339).

use super::{Check, Docs, Emit, Rule, entry_span};
use crate::diagnostic::Severity;
use crate::object::Workload;
use crate::yaml::Node;

pub const INITIAL_DELAY: Rule = Rule {
    id: "GL201",
    name: "initial-delay-without-startup-probe",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "A large fixed initialDelaySeconds stands in for a startupProbe",
    docs: Docs {
        what: "Flags a liveness or readiness probe whose `initialDelaySeconds` is at least 60 \
               (`[lint.thresholds] initial-delay-seconds`) in a container without a \
               `startupProbe`.",
        why: "A fixed delay has to cover the worst-case start, so every start pays it: the pod is \
              not Ready for that long even when the application is up in seconds, rollouts crawl, \
              and a crash during that window goes unnoticed. A slow start beyond it still ends in \
              a restart loop. A startupProbe holds liveness and readiness off only until the \
              application is actually up, and allows for the slow start.",
        example: "livenessProbe:\n  httpGet: {path: /, port: 9501}\n  initialDelaySeconds: 125\n  periodSeconds: 2\n",
        fix: "Add a `startupProbe` with the same handler whose `failureThreshold × periodSeconds` \
              covers the worst-case start (e.g. periodSeconds 2, failureThreshold 63 for 125 s), \
              and drop `initialDelaySeconds` on the other probes.",
    },
    check: Check::Workload(check_initial_delay),
};

pub const SAME_ENDPOINT: Rule = Rule {
    id: "GL202",
    name: "liveness-readiness-same-endpoint",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "Liveness and readiness probe the same endpoint with no slower liveness",
    docs: Docs {
        what: "Flags a container whose liveness and readiness probes hit the same endpoint (same \
               httpGet path, port, host and scheme; same tcpSocket or grpc port; same exec \
               command) unless liveness takes at least twice as long to kill \
               (`periodSeconds × failureThreshold`) as readiness takes to mark the pod unready. \
               Named ports are resolved against the container's ports.",
        why: "Readiness should check what the pod needs to serve (dependencies); liveness should \
              stay shallow, because a failed liveness restarts the container. When both hit one \
              endpoint with the same timing, a database outage turns \"stop sending traffic\" \
              into \"restart every pod\" at the same moment, and the restarts make the outage \
              worse.",
        example: "livenessProbe:\n  httpGet: {path: /, port: 9501}\nreadinessProbe:\n  httpGet: {path: /, port: 9501}\n",
        fix: "Give readiness its own endpoint that checks dependencies and keep liveness shallow \
              (e.g. `/livez` vs `/readyz`), or make liveness much more tolerant \
              (`failureThreshold` so that it kills after at least twice the readiness window).",
    },
    check: Check::Workload(check_same_endpoint),
};

const PROBES: [&str; 2] = ["livenessProbe", "readinessProbe"];

fn int_field(probe: &Node, key: &str, default: i64) -> i64 {
    probe.get(key).and_then(Node::as_i64).unwrap_or(default)
}

fn check_initial_delay(w: &Workload, emit: &mut Emit) {
    let threshold = emit.settings.initial_delay_seconds;
    for c in w.containers() {
        if c.node.get("startupProbe").is_some() {
            continue;
        }
        for probe_key in PROBES {
            let Some(probe) = c.node.get(probe_key) else {
                continue;
            };
            let Some(delay_node) = probe.get("initialDelaySeconds") else {
                continue;
            };
            let Some(delay) = delay_node.as_i64() else {
                continue;
            };
            if delay < threshold {
                continue;
            }
            let period = int_field(probe, "periodSeconds", 10).max(1);
            let failures = (delay + period - 1) / period;
            let handler = handler_text(probe);
            let span = entry_span(probe, "initialDelaySeconds").unwrap_or(delay_node.span);
            emit.at(
                w.object,
                span,
                &format!("{}.{probe_key}.initialDelaySeconds", c.path),
                format!(
                    "container `{}`: {probe_key} waits a fixed {delay}s before its first check and there is no startupProbe; \
                     every start pays the worst case",
                    c.name
                ),
            )
            .fix(format!(
                "add `startupProbe: {{{handler}periodSeconds: {period}, failureThreshold: {failures}}}` \
                 ({failures} × {period}s = {}s covers the {delay}s start) and drop initialDelaySeconds",
                failures * period
            ));
        }
    }
}

/// The probe's handler as inline YAML, for the suggested startupProbe.
fn handler_text(probe: &Node) -> String {
    if let Some(h) = probe.get("httpGet") {
        let path = h.get("path").and_then(Node::as_str).unwrap_or("/");
        let port = h.get("port").and_then(Node::as_str).unwrap_or("?");
        return format!("httpGet: {{path: {path}, port: {port}}}, ");
    }
    if let Some(t) = probe.get("tcpSocket") {
        return format!(
            "tcpSocket: {{port: {}}}, ",
            t.get("port").and_then(Node::as_str).unwrap_or("?")
        );
    }
    if let Some(g) = probe.get("grpc") {
        return format!(
            "grpc: {{port: {}}}, ",
            g.get("port").and_then(Node::as_str).unwrap_or("?")
        );
    }
    if probe.get("exec").is_some() {
        return "exec: <same command>, ".to_string();
    }
    String::new()
}

/// A probe's endpoint in comparable form; `None` when it has no handler we understand.
fn endpoint(probe: &Node, container: &Node) -> Option<String> {
    let port = |n: Option<&Node>| -> String {
        let Some(p) = n.and_then(Node::as_str) else {
            return "?".into();
        };
        if p.parse::<i64>().is_ok() {
            return p.to_string();
        }
        // A named port: resolve it so `http` and `8080` compare equal when they are the same port.
        container
            .get("ports")
            .map(Node::as_seq)
            .unwrap_or_default()
            .iter()
            .find(|cp| cp.get("name").and_then(Node::as_str) == Some(p))
            .and_then(|cp| cp.get("containerPort"))
            .and_then(Node::as_str)
            .unwrap_or(p)
            .to_string()
    };
    if let Some(h) = probe.get("httpGet") {
        let s = |k: &str, d: &str| h.get(k).and_then(Node::as_str).unwrap_or(d).to_string();
        return Some(format!(
            "{}://{}:{}{}",
            s("scheme", "HTTP").to_ascii_lowercase(),
            s("host", "<pod-ip>"),
            port(h.get("port")),
            s("path", "/")
        ));
    }
    if let Some(t) = probe.get("tcpSocket") {
        return Some(format!(
            "tcp://{}:{}",
            t.get("host").and_then(Node::as_str).unwrap_or("<pod-ip>"),
            port(t.get("port"))
        ));
    }
    if let Some(g) = probe.get("grpc") {
        // An unset service and `""` both ask for the server's overall health.
        return Some(
            match g.get("service").and_then(Node::as_str).unwrap_or("") {
                "" => format!("grpc port {}", port(g.get("port"))),
                svc => format!("grpc port {} service {svc}", port(g.get("port"))),
            },
        );
    }
    if let Some(cmd) = probe.at(&["exec", "command"]) {
        let words: Vec<&str> = cmd.as_seq().iter().filter_map(Node::as_str).collect();
        return Some(format!("exec {}", words.join("\u{1f}")));
    }
    None
}

fn window(probe: &Node) -> i64 {
    int_field(probe, "periodSeconds", 10).max(1) * int_field(probe, "failureThreshold", 3).max(1)
}

fn check_same_endpoint(w: &Workload, emit: &mut Emit) {
    for c in w.containers() {
        let (Some(live), Some(ready)) = (c.node.get("livenessProbe"), c.node.get("readinessProbe"))
        else {
            continue;
        };
        let (Some(a), Some(b)) = (endpoint(live, c.node), endpoint(ready, c.node)) else {
            continue;
        };
        if a != b {
            continue;
        }
        let (kill, unready) = (window(live), window(ready));
        if kill >= 2 * unready {
            continue;
        }
        let shown = a.replace('\u{1f}', " ");
        let lspan = c
            .node
            .entry("livenessProbe")
            .map_or(live.span, |e| e.key.span);
        let rspan = c
            .node
            .entry("readinessProbe")
            .map_or(ready.span, |e| e.key.span);
        emit.at(
            w.object,
            lspan,
            &format!("{}.livenessProbe", c.path),
            format!(
                "container `{}`: liveness and readiness both probe `{shown}`; liveness kills after {kill}s of failures, \
                 readiness marks unready after {unready}s, so a dependency outage restarts the pods instead of only draining them",
                c.name
            ),
        )
        .fix(format!(
            "give readiness its own endpoint that checks dependencies and keep liveness shallow, or raise liveness \
             periodSeconds × failureThreshold to at least {}s",
            2 * unready
        ))
        .related(w.object, rspan, "the readiness probe on the same endpoint");
    }
}
