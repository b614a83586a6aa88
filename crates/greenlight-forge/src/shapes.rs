//! The members of each forge's answers that the client reads, as serde structs: every member
//! read is required (an answer without it is not the forge's shape), every other member is
//! ignored (forges add fields). And the forges' error bodies, read into one sentence.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub(crate) struct Sha {
    pub sha: String,
}

/// GitHub's pull request (`GET /repos/{o}/{r}/pulls/{n}`).
#[derive(Debug, Deserialize)]
pub(crate) struct GitHubPull {
    pub number: u64,
    pub html_url: String,
    pub node_id: String,
    pub state: String,
    #[serde(default)]
    pub merged: bool,
    pub merge_commit_sha: Option<String>,
    pub head: Sha,
    /// An object while armed, `null` otherwise.
    #[serde(default)]
    pub auto_merge: Option<Value>,
}

/// GitHub's answer to a merge.
#[derive(Debug, Deserialize)]
pub(crate) struct GitHubMerged {
    pub sha: String,
    pub merged: bool,
}

/// GitLab's merge request.
#[derive(Debug, Deserialize)]
pub(crate) struct GitLabMr {
    pub iid: u64,
    pub web_url: String,
    pub state: String,
    pub sha: Option<String>,
    pub merge_commit_sha: Option<String>,
    #[serde(default)]
    pub squash_commit_sha: Option<String>,
    #[serde(default)]
    pub merge_when_pipeline_succeeds: bool,
}

/// Gitea's pull request.
#[derive(Debug, Deserialize)]
pub(crate) struct GiteaPull {
    pub number: u64,
    pub html_url: String,
    pub state: String,
    pub merged: bool,
    pub merge_commit_sha: Option<String>,
    pub head: Sha,
}

/// The longest stretch of a server's words an error keeps.
const MAX_MESSAGE: usize = 300;

/// What an error body says, in one line: GitHub's `message` and `errors[].message`, GitLab's
/// `message` (a string, a list, or an object of lists) or `error`, Gitea's `message`, a GraphQL
/// answer's `errors[].message`; else the start of the body as text.
pub(crate) fn error_text(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(json) => {
            let mut parts = Vec::new();
            collect(json.get("message"), &mut parts);
            collect(json.get("error"), &mut parts);
            if let Some(Value::Array(errors)) = json.get("errors") {
                for e in errors {
                    collect(e.get("message").or(Some(e)), &mut parts);
                }
            }
            parts.retain(|p| !p.trim().is_empty());
            parts.dedup();
            parts.join("; ")
        }
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    };
    shorten(&text)
}

fn collect(value: Option<&Value>, into: &mut Vec<String>) {
    match value {
        Some(Value::String(s)) => into.push(s.clone()),
        Some(Value::Array(items)) => items.iter().for_each(|i| collect(Some(i), into)),
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let mut inner = Vec::new();
                collect(Some(v), &mut inner);
                if !inner.is_empty() {
                    into.push(format!("{k}: {}", inner.join(", ")));
                }
            }
        }
        Some(Value::Number(n)) => into.push(n.to_string()),
        _ => {}
    }
}

/// At most [`MAX_MESSAGE`] characters, cut at a character boundary.
pub(crate) fn shorten(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(MAX_MESSAGE) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forges_error_body_reads_as_one_sentence() {
        let github = br#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}],"documentation_url":"x"}"#;
        assert_eq!(
            error_text(github),
            "Validation Failed; A pull request already exists for o:b."
        );
        let gitlab = br#"{"message":["Another open merge request already exists for this source branch: !1"]}"#;
        assert_eq!(
            error_text(gitlab),
            "Another open merge request already exists for this source branch: !1"
        );
        assert_eq!(
            error_text(br#"{"message":{"title":["is too long"]}}"#),
            "title: is too long"
        );
        assert_eq!(
            error_text(br#"{"error":"title is missing"}"#),
            "title is missing"
        );
        let graphql = br#"{"data":{"x":null},"errors":[{"type":"UNPROCESSABLE","message":"Pull request Pull request is in clean status"}]}"#;
        assert_eq!(
            error_text(graphql),
            "Pull request Pull request is in clean status"
        );
        assert_eq!(
            error_text(b"<html>502 Bad Gateway</html>"),
            "<html>502 Bad Gateway</html>"
        );
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        let long = "é".repeat(400);
        let cut = shorten(&long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE + 1);
        assert!(cut.ends_with('…'));
    }
}
