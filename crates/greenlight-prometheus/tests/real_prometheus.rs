//! The client against a real Prometheus (Debian's, started by the test kit on a loopback port)
//! scraping an exporter the test controls. Each test starts its own; values are waited for
//! through the kit, never slept for.

use greenlight_prometheus::{
    Auth, ClientOptions, PromError, PrometheusClient, QueryResult, ResultType, ResultValue, Secret,
};
use greenlight_testkit::{BasicAuthUser, Exporter, Prometheus, SilentServer};
use std::time::{Duration, Instant, SystemTime};

const WAIT: Duration = Duration::from_secs(30);
const RATIO: &str = "http_requests_error_ratio";

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn client(url: &str, options: ClientOptions) -> PrometheusClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    PrometheusClient::new(url, options).unwrap()
}

fn query(prom: &Prometheus, promql: &str) -> Result<QueryResult, PromError> {
    block_on(client(prom.url(), ClientOptions::default()).query(promql, None))
}

fn list(r: &QueryResult) -> &[f64] {
    match &r.value {
        ResultValue::List(v) => v,
        other => panic!("not a list: {other:?}"),
    }
}

#[test]
fn a_vector_query_returns_the_exporters_values_one_per_series_in_prometheus_order() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "web")], 0.01);
    exporter.set(RATIO, &[("app", "api")], 0.25);
    exporter.set(RATIO, &[("app", "db")], 0.5);
    let prom = Prometheus::start(&exporter);
    let q = format!("sort_desc({RATIO})");
    prom.wait_for_value(&q, |v| v == [0.5, 0.25, 0.01], WAIT);

    let r = query(&prom, &q).unwrap();
    assert_eq!(r.result_type, ResultType::Vector);
    assert_eq!(list(&r), [0.5, 0.25, 0.01]);
    let apps: Vec<&str> = r.series.iter().map(|s| s.labels["app"].as_str()).collect();
    assert_eq!(apps, ["db", "api", "web"]);
    assert_eq!(r.series[0].labels["job"], "exporter");
    assert_eq!(r.series[0].labels["__name__"], RATIO);

    // One series by its labels, as a gate's condition would ask.
    let web = query(&prom, &format!("{RATIO}{{app=\"web\"}}")).unwrap();
    assert_eq!(list(&web), [0.01]);
}

#[test]
fn a_scalar_query_is_one_float() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "web")], 0.01);
    let prom = Prometheus::start(&exporter);
    let q = format!("scalar({RATIO}{{app=\"web\"}})");
    prom.wait_for_value(&q, |v| v == [0.01], WAIT);

    let r = query(&prom, &q).unwrap();
    assert_eq!(r.result_type, ResultType::Scalar);
    assert_eq!(r.value, ResultValue::Scalar(0.01));
    assert!(r.series.is_empty());
    assert_eq!(query(&prom, "42").unwrap().value, ResultValue::Scalar(42.0));
}

#[test]
fn a_query_matching_nothing_is_an_empty_vector() {
    let exporter = Exporter::start();
    let prom = Prometheus::start(&exporter);
    let r = query(&prom, "no_such_metric{app=\"web\"}").unwrap();
    assert_eq!(r.result_type, ResultType::Vector);
    assert_eq!(r.value, ResultValue::List(vec![]));
    assert!(r.series.is_empty());
}

#[test]
fn a_syntax_error_is_an_error_naming_prometheus_message() {
    let exporter = Exporter::start();
    let prom = Prometheus::start(&exporter);
    let err = query(&prom, "sum(").unwrap_err();
    let PromError::Query {
        status,
        error_type,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*status, 400);
    assert_eq!(error_type, "bad_data");
    assert!(message.contains("parse error"), "{message}");
    let text = err.to_string();
    assert!(
        text.contains("rejected the query (HTTP 400, bad_data)") && text.contains("parse error"),
        "{text}"
    );

    // A string result is a successful answer that yields no measurement.
    let err = query(&prom, "\"hello\"").unwrap_err();
    assert!(
        matches!(&err, PromError::UnsupportedResult { result_type, .. } if result_type == "string"),
        "{err:?}"
    );
}

#[test]
fn a_matrix_is_every_value_of_its_series() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "web")], 0.01);
    let prom = Prometheus::start(&exporter);
    // Enough scrapes for a range of two seconds to hold several samples.
    let q = format!("count_over_time({RATIO}{{app=\"web\"}}[2s])");
    prom.wait_for_value(&q, |v| v.first().is_some_and(|n| *n >= 3.0), WAIT);

    let r = query(&prom, &format!("{RATIO}{{app=\"web\"}}[2s]")).unwrap();
    assert_eq!(r.result_type, ResultType::Matrix);
    let values = list(&r);
    assert!(values.len() >= 3, "{r:?}");
    assert!(values.iter().all(|v| *v == 0.01), "{r:?}");
    assert_eq!(r.series.len(), 1);
    assert_eq!(r.series[0].samples.len(), values.len());
    let times: Vec<f64> = r.series[0].samples.iter().map(|s| s.timestamp).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn a_value_that_changes_between_queries_is_seen_changing() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "web")], 0.01);
    let prom = Prometheus::start(&exporter);
    let q = format!("{RATIO}{{app=\"web\"}}");
    prom.wait_for_value(&q, |v| v == [0.01], WAIT);
    assert_eq!(list(&query(&prom, &q).unwrap()), [0.01]);

    exporter.set(RATIO, &[("app", "web")], 0.5);
    prom.wait_for_value(&q, |v| v == [0.5], WAIT);
    assert_eq!(list(&query(&prom, &q).unwrap()), [0.5]);

    // Asked about a moment before the change, Prometheus answers from then: `time` is sent.
    let before = SystemTime::now() - Duration::from_secs(3600);
    let r = block_on(client(prom.url(), ClientOptions::default()).query(&q, Some(before)));
    assert_eq!(r.unwrap().value, ResultValue::List(vec![]));
}

#[test]
fn nan_and_infinities_are_floats() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "a")], f64::NAN);
    exporter.set(RATIO, &[("app", "b")], f64::INFINITY);
    exporter.set(RATIO, &[("app", "c")], f64::NEG_INFINITY);
    let prom = Prometheus::start(&exporter);
    for (app, check) in [
        ("a", f64::is_nan as fn(f64) -> bool),
        ("b", |v: f64| v == f64::INFINITY),
        ("c", |v: f64| v == f64::NEG_INFINITY),
    ] {
        let q = format!("{RATIO}{{app=\"{app}\"}}");
        prom.wait_for_value(&q, |v| v.len() == 1 && check(v[0]), WAIT);
        let r = query(&prom, &q).unwrap();
        assert!(list(&r).len() == 1 && check(list(&r)[0]), "{app}: {r:?}");
    }
    // NaN as a scalar too (scalar() of no series is NaN).
    let r = query(&prom, "scalar(no_such_metric)").unwrap();
    assert!(
        matches!(r.value, ResultValue::Scalar(v) if v.is_nan()),
        "{r:?}"
    );
}

#[test]
fn a_server_that_never_answers_is_a_timeout_that_shows_no_secret() {
    let server = SilentServer::start();
    let c = client(
        &server.url(),
        ClientOptions {
            timeout: Duration::from_millis(500),
            auth: Some(Auth::Bearer(Secret::new("tok-very-secret"))),
            headers: vec![("X-Scope-OrgID".into(), Secret::new("tenant-secret"))],
            ..ClientOptions::default()
        },
    );
    let started = Instant::now();
    let err = block_on(c.query("up", None)).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(&err, PromError::Timeout { after, .. } if *after == Duration::from_millis(500)),
        "{err:?}"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let text = format!("{err} {err:?} {c:?}");
    assert!(!text.contains("secret"), "{text}");
    assert_eq!(
        err.to_string(),
        format!(
            "Prometheus at {}/api/v1/query did not answer within 500ms",
            server.url()
        )
    );

    // The credentials did travel, as headers, on a POST of the form.
    let heads = server.requests();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("post /api/v1/query http/1.1"), "{head}");
    assert!(
        head.contains("authorization: bearer tok-very-secret"),
        "{head}"
    );
    assert!(head.contains("x-scope-orgid: tenant-secret"), "{head}");
    assert!(
        head.contains("content-type: application/x-www-form-urlencoded"),
        "{head}"
    );
}

#[test]
fn no_server_is_a_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = client(
        &format!("http://127.0.0.1:{port}"),
        ClientOptions::default(),
    );
    let err = block_on(c.query("up", None)).unwrap_err();
    assert!(matches!(err, PromError::Connect { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot connect to Prometheus at http://127.0.0.1:{port}/api/v1/query: "
        )),
        "{err}"
    );
}

/// `kit-password`, hashed with bcrypt (cost 4) for Prometheus' web config.
const KIT_PASSWORD_BCRYPT: &str = "$2b$04$l905UMKUwo4AK2dM0PDgheYXd2SIDnywl7zIJ2Dy4SMFj.qP5Aoby";

#[test]
fn basic_auth_is_sent_and_a_refusal_names_the_status_without_the_password() {
    let exporter = Exporter::start();
    exporter.set(RATIO, &[("app", "web")], 0.01);
    let user = BasicAuthUser {
        username: "reader".into(),
        password: "kit-password".into(),
        bcrypt_hash: KIT_PASSWORD_BCRYPT.into(),
    };
    let prom = Prometheus::start_with_basic_auth(&exporter, &user);
    let q = format!("{RATIO}{{app=\"web\"}}");
    prom.wait_for_value(&q, |v| v == [0.01], WAIT);

    let with = |password: &str| {
        client(
            prom.url(),
            ClientOptions {
                auth: Some(Auth::Basic {
                    username: "reader".into(),
                    password: Secret::new(password),
                }),
                ..ClientOptions::default()
            },
        )
    };
    let r = block_on(with("kit-password").query(&q, None)).unwrap();
    assert_eq!(list(&r), [0.01]);

    let err = block_on(with("wrong-password").query(&q, None)).unwrap_err();
    assert_eq!(err.http_status(), Some(401), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("wrong-password"), "{text}");
    assert!(text.contains("HTTP 401 Unauthorized"), "{text}");

    let anonymous = block_on(query_anonymously(&prom, &q)).unwrap_err();
    assert_eq!(anonymous.http_status(), Some(401), "{anonymous:?}");
}

async fn query_anonymously(prom: &Prometheus, q: &str) -> Result<QueryResult, PromError> {
    client(prom.url(), ClientOptions::default())
        .query(q, None)
        .await
}
