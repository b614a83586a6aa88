//! What `greenlight promote plan` computes from a [`Promotion`]: each check's worst-case
//! duration, their total, and every place where a slower check runs before a faster one (the
//! gate stops at the first check that does not pass, so cheap, fast-failing checks belong
//! first). Checks run one after another, so the total is their sum.
//!
//! Worst case of a Prometheus metric ([`metric_worst_case`]), as Argo Rollouts schedules
//! measurements (the next one is due `interval` after the previous one *finished*, or 10 s after
//! one that errored; an errored measurement does not count toward `count`, and the metric ends
//! in Error once more than `consecutiveErrorLimit` errors come in a row):
//!
//! ```text
//! initialDelay + count × timeout + (count − 1) × interval
//!              + count × consecutiveErrorLimit × (timeout + 10 s)
//! ```
//!
//! Each measurement may take its whole query `timeout`; before each counted measurement up to
//! `consecutiveErrorLimit` errors may come (a counted one resets the run of errors), each
//! costing a query and the 10 s retry wait. Limits (`failureLimit`, `inconclusiveLimit`,
//! `consecutiveSuccessLimit`) can only end a metric sooner. The metrics of one analysis run
//! together, so an analysis takes as long as its slowest metric.

use super::{Check, CheckKind, ERROR_RETRY_INTERVAL_MS, Metric, Promotion};

/// The plan of a whole promotion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// In the written order.
    pub checks: Vec<CheckPlan>,
    pub total_ms: i64,
    pub warnings: Vec<OrderWarning>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckPlan {
    pub name: String,
    /// The config's word for the check's kind (`http`, `command`, `prometheus`, `analysisTemplate`).
    pub kind: &'static str,
    pub worst_ms: i64,
    /// An analysis's metrics, each with its bound; empty for `http` and `command`.
    pub metrics: Vec<MetricPlan>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricPlan {
    pub name: String,
    pub bound: MetricBound,
}

/// The terms of a metric's worst case, kept apart so the plan can show its arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricBound {
    pub initial_delay_ms: i64,
    /// Counted measurements, each up to `query_timeout_ms`.
    pub measurements: u32,
    pub query_timeout_ms: i64,
    /// `measurements − 1` waits of `interval_ms`.
    pub intervals: u32,
    pub interval_ms: i64,
    /// Errored measurements the metric can survive in all, each costing a query and the retry
    /// wait ([`ERROR_RETRY_INTERVAL_MS`]).
    pub error_retries: u64,
    pub total_ms: i64,
}

/// A check that runs after slower ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderWarning {
    /// Index into [`Plan::checks`] of the faster check.
    pub check: usize,
    /// Indices of the earlier checks whose worst case is longer, in order.
    pub slower_before: Vec<usize>,
}

/// The longest a Prometheus metric can run before it reaches a result (see the module docs).
/// This is the one place that bound is computed; the analysis engine's own schedule is what it
/// must agree with.
pub fn metric_worst_case(m: &Metric) -> MetricBound {
    let count = m.count.max(1);
    let timeout = m.prometheus.timeout_ms;
    let interval = m.interval_ms.unwrap_or(0);
    let intervals = count - 1;
    let error_retries = u64::from(count) * u64::from(m.consecutive_error_limit);
    let retries = i64::try_from(error_retries).unwrap_or(i64::MAX);
    let total_ms = m
        .initial_delay_ms
        .saturating_add(i64::from(count).saturating_mul(timeout))
        .saturating_add(i64::from(intervals).saturating_mul(interval))
        .saturating_add(retries.saturating_mul(timeout.saturating_add(ERROR_RETRY_INTERVAL_MS)));
    // The analysis engine bounds a metric's run the same way; its figure is the one that counts.
    let total_ms = match m
        .analysis_spec()
        .validate()
        .map(|metric| metric.worst_case(timeout))
    {
        Ok(crate::analysis::WorstCase::Bounded { ms }) => ms,
        _ => total_ms,
    };
    MetricBound {
        initial_delay_ms: m.initial_delay_ms,
        measurements: count,
        query_timeout_ms: timeout,
        intervals,
        interval_ms: interval,
        error_retries,
        total_ms,
    }
}

/// The longest one check can take: an `http` or `command` check its timeout, an analysis its
/// slowest metric.
pub fn check_worst_case(check: &Check) -> i64 {
    match &check.kind {
        CheckKind::Http(h) => h.timeout_ms,
        CheckKind::Command(c) => c.timeout_ms,
        CheckKind::Analysis(a) => a
            .metrics
            .iter()
            .map(|m| metric_worst_case(m).total_ms)
            .max()
            .unwrap_or(0),
    }
}

pub fn plan(p: &Promotion) -> Plan {
    let checks: Vec<CheckPlan> = p
        .checks
        .iter()
        .map(|c| CheckPlan {
            name: c.name.clone(),
            kind: c.kind.word(),
            worst_ms: check_worst_case(c),
            metrics: match &c.kind {
                CheckKind::Analysis(a) => a
                    .metrics
                    .iter()
                    .map(|m| MetricPlan {
                        name: m.name.clone(),
                        bound: metric_worst_case(m),
                    })
                    .collect(),
                _ => Vec::new(),
            },
        })
        .collect();
    let total_ms = checks
        .iter()
        .fold(0i64, |sum, c| sum.saturating_add(c.worst_ms));
    let warnings = checks
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let slower_before: Vec<usize> = (0..i)
                .filter(|&j| checks[j].worst_ms > c.worst_ms)
                .collect();
            (!slower_before.is_empty()).then_some(OrderWarning {
                check: i,
                slower_before,
            })
        })
        .collect();
    Plan {
        checks,
        total_ms,
        warnings,
    }
}

/// A duration as a plan shows it: `45s`, `2m`, `1h30m`, `1m2.5s`, `500ms`.
pub fn compact_duration(ms: i64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (hours, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let (seconds, millis) = (rest / 1000, rest % 1000);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if millis > 0 {
        let frac = format!("{millis:03}");
        out.push_str(&format!("{seconds}.{}s", frac.trim_end_matches('0')));
    } else if seconds > 0 {
        out.push_str(&format!("{seconds}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        Analysis, AnalysisOrigin, CommandCheck, HttpCheck, PrometheusQuery, Template,
    };

    fn metric(count: u32, interval_ms: Option<i64>, initial_delay_ms: i64) -> Metric {
        Metric {
            name: "error-rate".into(),
            initial_delay_ms,
            interval_ms,
            count,
            success_condition: Some("result[0] < 0.01".into()),
            failure_condition: None,
            failure_limit: Some(0),
            inconclusive_limit: 0,
            consecutive_error_limit: 4,
            consecutive_success_limit: 0,
            allow_no_data: false,
            prometheus: PrometheusQuery {
                address: Template::new("http://prom:9090").unwrap(),
                query: Template::new("up").unwrap(),
                timeout_ms: 30_000,
                insecure: false,
                headers: Vec::new(),
            },
        }
    }

    #[test]
    fn the_plans_bound_is_the_analysis_engines() {
        for (count, interval, delay) in [(1, None, 0), (10, Some(30_000), 60_000), (3, Some(1), 5)]
        {
            let m = metric(count, interval, delay);
            let engine = m
                .analysis_spec()
                .validate()
                .unwrap()
                .worst_case(m.prometheus.timeout_ms);
            assert_eq!(
                crate::analysis::WorstCase::Bounded {
                    ms: metric_worst_case(&m).total_ms
                },
                engine
            );
        }
    }

    #[test]
    fn a_metric_worst_case_counts_delays_queries_intervals_and_error_retries() {
        // 1m + 10 × 30s + 9 × 30s + 10 × 4 × (30s + 10s) = 60 + 300 + 270 + 1600 s
        let b = metric_worst_case(&metric(10, Some(30_000), 60_000));
        assert_eq!(b.measurements, 10);
        assert_eq!(b.intervals, 9);
        assert_eq!(b.error_retries, 40);
        assert_eq!(b.total_ms, 2_230_000);
        // One measurement, no errors tolerated: the delay and one query.
        let mut m = metric(1, None, 0);
        m.consecutive_error_limit = 0;
        m.prometheus.timeout_ms = 5_000;
        assert_eq!(metric_worst_case(&m).total_ms, 5_000);
    }

    fn check(name: &str, kind: CheckKind) -> Check {
        Check {
            name: name.into(),
            kind,
        }
    }

    fn http(timeout_ms: i64) -> CheckKind {
        CheckKind::Http(HttpCheck {
            url: Template::new("http://{{candidate.service}}/").unwrap(),
            status: 200,
            body_contains: None,
            timeout_ms,
        })
    }

    fn command(timeout_ms: i64) -> CheckKind {
        CheckKind::Command(CommandCheck {
            argv: vec![Template::new("true").unwrap()],
            timeout_ms,
        })
    }

    #[test]
    fn an_analysis_takes_as_long_as_its_slowest_metric() {
        let mut slow = metric(10, Some(30_000), 60_000);
        slow.name = "slow".into();
        let fast = metric(1, None, 0);
        let c = check(
            "slo",
            CheckKind::Analysis(Analysis {
                origin: AnalysisOrigin::Template {
                    file: "slo.yaml".into(),
                    kind: "AnalysisTemplate".into(),
                    name: "slo".into(),
                },
                metrics: vec![fast, slow],
            }),
        );
        assert_eq!(check_worst_case(&c), 2_230_000);
    }

    #[test]
    fn the_plan_sums_in_order_and_warns_where_a_slower_check_comes_first() {
        let checks = vec![
            check("ready", http(5_000)),
            check("load", command(600_000)),
            check("smoke", command(120_000)),
            check("soak", command(900_000)),
            check("ping", http(5_000)),
        ];
        let p = plan_of(checks);
        assert_eq!(
            p.checks.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["ready", "load", "smoke", "soak", "ping"]
        );
        assert_eq!(p.total_ms, 5_000 + 600_000 + 120_000 + 900_000 + 5_000);
        assert_eq!(
            p.warnings,
            vec![
                OrderWarning {
                    check: 2,
                    slower_before: vec![1]
                },
                OrderWarning {
                    check: 4,
                    slower_before: vec![1, 2, 3]
                },
            ]
        );
        // Equal worst cases are no reason to warn.
        let p = plan_of(vec![check("a", http(5_000)), check("b", http(5_000))]);
        assert!(p.warnings.is_empty());
    }

    fn plan_of(checks: Vec<Check>) -> Plan {
        use crate::config::*;
        use greenlight_core::directive::AppRef;
        let app = |name: &str| AppRef {
            namespace: None,
            name: name.into(),
        };
        plan(&Promotion {
            live: Live {
                app: app("web"),
                manifest: "prod/web.yaml".into(),
                workload: Workload {
                    kind: WorkloadKind::Deployment,
                    name: "web".into(),
                    namespace: None,
                    container: "web".into(),
                },
            },
            candidate: Candidate {
                app: app("web-candidates"),
                path: "candidates".into(),
                namespace: "shop".into(),
                service: "web-candidate".into(),
                port: 8080,
                replicas: 1,
            },
            checks,
            retention: Retention {
                failed_ms: DEFAULT_FAILED_RETENTION_MS,
            },
            commit: PromotionCommit {
                watch: WatchTrailer::default(),
                landing: Default::default(),
            },
        })
    }

    #[test]
    fn compact_durations() {
        for (ms, text) in [
            (0, "0s"),
            (500, "500ms"),
            (5_000, "5s"),
            (1_500, "1.5s"),
            (62_500, "1m2.5s"),
            (120_000, "2m"),
            (5_400_000, "1h30m"),
            (3_600_000, "1h"),
            (3_601_000, "1h1s"),
            (2_230_000, "37m10s"),
        ] {
            assert_eq!(compact_duration(ms), text, "{ms}");
        }
    }
}
