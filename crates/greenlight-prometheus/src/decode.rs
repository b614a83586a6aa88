//! Prometheus' query answer (`{"status": …, "data": {"resultType": …, "result": …}}`) decoded
//! the way Argo Rollouts' Prometheus provider decodes it into the `result` its conditions see:
//!
//! - `scalar` → one float;
//! - `vector` → one float per series, in the order Prometheus returned them (an empty vector,
//!   a query that matched nothing, is an empty list, not an error);
//! - `matrix` → every value of every series, series in Prometheus' order and each series'
//!   values in time order, as one flat list. This is what Rollouts' range queries hand to
//!   conditions (its documentation asserts on them with `all(result, # < 1000)`); Rollouts
//!   releases before range queries refused a matrix as "metric type not supported". A flat
//!   list keeps a condition written for a vector meaningful for a matrix;
//! - `string` and any other type → [`PromError::UnsupportedResult`];
//! - `status: "error"` → [`PromError::Query`] with Prometheus' `errorType` and `error`.
//!
//! Sample values are strings on the wire; `NaN`, `+Inf` and `-Inf` are floats like any
//! other. A native-histogram sample has no float value and is refused rather than read as 0.
//! The series' labels and timestamps are kept beside the measurement, as evidence.

use crate::auth::Secrets;
use crate::error::PromError;
use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The result types Prometheus answers a query with that yield a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultType {
    Scalar,
    Vector,
    Matrix,
}

/// What a condition is evaluated against: Rollouts' `result`.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultValue {
    /// A scalar result.
    Scalar(f64),
    /// A vector's values, or a matrix's values flattened (see the module documentation).
    List(Vec<f64>),
}

impl ResultValue {
    /// The values as a list: a scalar is a list of one.
    pub fn to_list(&self) -> Vec<f64> {
        match self {
            ResultValue::Scalar(v) => vec![*v],
            ResultValue::List(vs) => vs.clone(),
        }
    }
}

/// One sample: when (Unix seconds, as Prometheus sent it) and the value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub timestamp: f64,
    pub value: f64,
}

/// A series of a vector (one sample) or a matrix (its samples in time order).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

/// A decoded answer to a query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub result_type: ResultType,
    /// The measurement, as Rollouts' conditions see it.
    pub value: ResultValue,
    /// Each series as Prometheus returned it, in its order; empty for a scalar.
    pub series: Vec<Series>,
    /// Prometheus' warnings (a partial answer, say); the answer is still used.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Json,
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: Option<(f64, String)>,
    histogram: Option<Json>,
}

#[derive(Deserialize)]
struct MatrixSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
    #[serde(default)]
    histograms: Vec<Json>,
}

/// How much of a body an error quotes.
const BODY_EXCERPT: usize = 200;

/// Decodes an answer of `/api/v1/query` from `url` with HTTP `status` and `body`. Server text
/// that reaches an error passes through `secrets` first.
pub(crate) fn decode(
    url: &str,
    status: u16,
    body: &[u8],
    secrets: &Secrets,
) -> Result<QueryResult, PromError> {
    let bad = |why: String| PromError::BadJson {
        url: url.to_string(),
        why: secrets.scrub(&why),
    };
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        // Not the API's JSON: an unsuccessful answer is described by its status (a proxy's
        // page, a gateway's refusal); a successful one is bad JSON.
        Err(_) if !(200..300).contains(&status) => {
            return Err(PromError::Status {
                url: url.to_string(),
                status,
                body: excerpt(&secrets.scrub(&String::from_utf8_lossy(body))),
            });
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    match envelope.status.as_str() {
        "error" => {
            return Err(PromError::Query {
                url: url.to_string(),
                status,
                error_type: secrets.scrub(envelope.error_type.as_deref().unwrap_or("unknown")),
                message: secrets.scrub(envelope.error.as_deref().unwrap_or("")),
            });
        }
        "success" if (200..300).contains(&status) => {}
        "success" => {
            return Err(PromError::Status {
                url: url.to_string(),
                status,
                body: excerpt(&secrets.scrub(&String::from_utf8_lossy(body))),
            });
        }
        other => return Err(bad(format!("unknown status {other:?}"))),
    }
    let data = envelope
        .data
        .ok_or_else(|| bad("a successful answer without data".to_string()))?;
    let warnings = envelope.warnings.iter().map(|w| secrets.scrub(w)).collect();
    match data.result_type.as_str() {
        "scalar" => {
            let (_at, text): (f64, String) = serde_json::from_value(data.result)
                .map_err(|e| bad(format!("scalar result: {e}")))?;
            let value = parse_value(&text).map_err(bad)?;
            Ok(QueryResult {
                result_type: ResultType::Scalar,
                value: ResultValue::Scalar(value),
                series: Vec::new(),
                warnings,
            })
        }
        "vector" => {
            let samples: Vec<VectorSample> = serde_json::from_value(data.result)
                .map_err(|e| bad(format!("vector result: {e}")))?;
            let mut values = Vec::with_capacity(samples.len());
            let mut series = Vec::with_capacity(samples.len());
            for s in samples {
                let Some((timestamp, text)) = s.value else {
                    return Err(bad(if s.histogram.is_some() {
                        format!(
                            "series {} is a native histogram, which has no float value",
                            show_labels(&s.metric)
                        )
                    } else {
                        format!("series {} has no value", show_labels(&s.metric))
                    }));
                };
                let value = parse_value(&text).map_err(bad)?;
                values.push(value);
                series.push(Series {
                    labels: s.metric,
                    samples: vec![Sample { timestamp, value }],
                });
            }
            Ok(QueryResult {
                result_type: ResultType::Vector,
                value: ResultValue::List(values),
                series,
                warnings,
            })
        }
        "matrix" => {
            let streams: Vec<MatrixSeries> = serde_json::from_value(data.result)
                .map_err(|e| bad(format!("matrix result: {e}")))?;
            let mut values = Vec::new();
            let mut series = Vec::with_capacity(streams.len());
            for s in streams {
                if !s.histograms.is_empty() {
                    return Err(bad(format!(
                        "series {} holds native histograms, which have no float value",
                        show_labels(&s.metric)
                    )));
                }
                let mut samples = Vec::with_capacity(s.values.len());
                for (timestamp, text) in s.values {
                    let value = parse_value(&text).map_err(&bad)?;
                    values.push(value);
                    samples.push(Sample { timestamp, value });
                }
                series.push(Series {
                    labels: s.metric,
                    samples,
                });
            }
            Ok(QueryResult {
                result_type: ResultType::Matrix,
                value: ResultValue::List(values),
                series,
                warnings,
            })
        }
        other => Err(PromError::UnsupportedResult {
            url: url.to_string(),
            result_type: other.to_string(),
        }),
    }
}

/// A sample value as Prometheus writes it: Go's float formatting, with `NaN`, `+Inf`, `-Inf`.
fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text
            .parse::<f64>()
            .ok()
            // Rust also reads "inf" and "nan" spellings Prometheus never writes; refuse them.
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("sample value {:?} is not a number", excerpt(text))),
    }
}

fn show_labels(labels: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// The start of `text`, on one line, at most [`BODY_EXCERPT`] characters.
fn excerpt(text: &str) -> String {
    let one_line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(BODY_EXCERPT) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:9090/api/v1/query";

    fn ok(body: &str) -> QueryResult {
        decode(URL, 200, body.as_bytes(), &Secrets::default()).unwrap()
    }

    fn err(status: u16, body: &str) -> PromError {
        decode(URL, status, body.as_bytes(), &Secrets::default()).unwrap_err()
    }

    // The bodies below are answers of Prometheus 2.42 (Debian's), recorded and shortened.

    #[test]
    fn a_scalar_is_one_float() {
        let r = ok(
            r#"{"status":"success","data":{"resultType":"scalar","result":[1796317327.05,"0.01"]}}"#,
        );
        assert_eq!(r.result_type, ResultType::Scalar);
        assert_eq!(r.value, ResultValue::Scalar(0.01));
        assert!(r.series.is_empty());
        assert_eq!(r.value.to_list(), vec![0.01]);
    }

    #[test]
    fn a_vector_is_one_float_per_series_in_prometheus_order() {
        let r = ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"http_requests_error_ratio","app":"web","job":"exporter"},"value":[1796317327.034,"0.01"]},
            {"metric":{"__name__":"http_requests_error_ratio","app":"api","job":"exporter"},"value":[1796317327.034,"NaN"]},
            {"metric":{"__name__":"http_requests_error_ratio","app":"db","job":"exporter"},"value":[1796317327.034,"+Inf"]},
            {"metric":{"app":"cache"},"value":[1796317327.034,"-Inf"]},
            {"metric":{},"value":[1796317327.034,"1e+06"]}]}}"#,
        );
        assert_eq!(r.result_type, ResultType::Vector);
        let ResultValue::List(values) = &r.value else {
            panic!("{r:?}")
        };
        assert_eq!(values.len(), 5);
        assert_eq!(values[0], 0.01);
        assert!(values[1].is_nan());
        assert_eq!(values[2], f64::INFINITY);
        assert_eq!(values[3], f64::NEG_INFINITY);
        assert_eq!(values[4], 1e6);
        let apps: Vec<Option<&str>> = r
            .series
            .iter()
            .map(|s| s.labels.get("app").map(String::as_str))
            .collect();
        assert_eq!(
            apps,
            [Some("web"), Some("api"), Some("db"), Some("cache"), None]
        );
        assert_eq!(r.series[0].samples[0].timestamp, 1796317327.034);
    }

    #[test]
    fn a_query_matching_nothing_is_an_empty_vector() {
        let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#);
        assert_eq!(r.value, ResultValue::List(vec![]));
        assert!(r.series.is_empty());
    }

    #[test]
    fn a_matrix_is_every_value_of_every_series_in_order() {
        let r = ok(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"app":"web"},"values":[[1796317326.250,"0.01"],[1796317326.500,"0.02"],[1796317327,"0.03"]]},
            {"metric":{"app":"api"},"values":[[1796317326.250,"1"],[1796317326.500,"NaN"]]}]}}"#,
        );
        assert_eq!(r.result_type, ResultType::Matrix);
        let values = r.value.to_list();
        assert_eq!(values[..3], [0.01, 0.02, 0.03]);
        assert_eq!(values[3], 1.0);
        assert!(values[4].is_nan());
        assert_eq!(values.len(), 5);
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[0].samples.len(), 3);
        assert_eq!(r.series[0].samples[2].timestamp, 1796317327.0);
    }

    #[test]
    fn a_string_result_is_an_error() {
        let e = err(
            200,
            r#"{"status":"success","data":{"resultType":"string","result":[1796317322.915,"hello"]}}"#,
        );
        assert!(
            matches!(&e, PromError::UnsupportedResult { result_type, .. } if result_type == "string"),
            "{e:?}"
        );
        assert!(e.to_string().contains("string result"), "{e}");
    }

    #[test]
    fn status_error_carries_prometheus_error_type_and_message() {
        let e = err(
            400,
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"}"#,
        );
        assert_eq!(
            e,
            PromError::Query {
                url: URL.into(),
                status: 400,
                error_type: "bad_data".into(),
                message: "invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"
                    .into(),
            }
        );
        assert_eq!(
            e.to_string(),
            "Prometheus at http://127.0.0.1:9090/api/v1/query rejected the query (HTTP 400, bad_data): invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"
        );
        let e = err(
            422,
            r#"{"status":"error","errorType":"execution","error":"vector cannot contain metrics with the same labelset"}"#,
        );
        assert!(
            matches!(&e, PromError::Query { error_type, status: 422, .. } if error_type == "execution"),
            "{e:?}"
        );
    }

    #[test]
    fn warnings_are_kept() {
        let r = ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[]},"warnings":["partial answer"]}"#,
        );
        assert_eq!(r.warnings, ["partial answer"]);
    }

    #[test]
    fn not_json_is_bad_json_on_success_and_the_status_otherwise() {
        assert!(matches!(
            err(200, "<html>login</html>"),
            PromError::BadJson { .. }
        ));
        let e = err(502, "<html>Bad Gateway</html>\n");
        assert_eq!(
            e.to_string(),
            "Prometheus at http://127.0.0.1:9090/api/v1/query answered HTTP 502 Bad Gateway: <html>Bad Gateway</html>"
        );
        assert_eq!(e.http_status(), Some(502));
        let long = "x".repeat(5000);
        let PromError::Status { body, .. } = err(503, &long) else {
            panic!()
        };
        assert_eq!(body.chars().count(), BODY_EXCERPT + 1);
    }

    #[test]
    fn wrong_shapes_are_bad_json_naming_what() {
        for (body, needle) in [
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"abc"]}]}}"#,
                "\"abc\" is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"inf"]}]}}"#,
                "\"inf\" is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":{"x":1}}}"#,
                "scalar result",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"histogram":[1,{"count":"1"}]}]}}"#,
                "native histogram",
            ),
            (r#"{"status":"success"}"#, "without data"),
            (r#"{"status":"maybe"}"#, "unknown status"),
        ] {
            let e = err(200, body);
            assert!(
                matches!(&e, PromError::BadJson { why, .. } if why.contains(needle)),
                "{body}: {e:?}"
            );
        }
    }

    #[test]
    fn server_text_is_scrubbed_of_secrets() {
        let mut secrets = Secrets::default();
        secrets.add("tok-very-secret");
        let e = decode(
            URL,
            401,
            b"denied: Bearer tok-very-secret is not valid",
            &secrets,
        )
        .unwrap_err();
        assert_eq!(e.http_status(), Some(401));
        let text = format!("{e} {e:?}");
        assert!(!text.contains("tok-very-secret"), "{text}");
        assert!(text.contains("Bearer <redacted>"), "{text}");
        let e = decode(
            URL,
            400,
            br#"{"status":"error","errorType":"bad_data","error":"echo tok-very-secret"}"#,
            &secrets,
        )
        .unwrap_err();
        assert!(!format!("{e} {e:?}").contains("tok-very-secret"));
    }
}
