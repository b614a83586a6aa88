//! CI pipelines and shell scripts as the scripts they run: a GitHub Actions workflow's steps
//! (`run:` with `env:` at workflow, job and step level and `working-directory`), a GitLab CI
//! file's jobs (`before_script`, `script`, `after_script` and `variables`, with `extends`,
//! `default:` and `!reference` resolved within the file) and a shell script file. Each script
//! is [`Embedded`] text, so a rule reports at the line and column in the file.
//! Must never: run anything, read another file (GitLab `include:` is not followed), or
//! invent a value: a variable whose value is not written in the file is unknown.

use crate::embedded::Embedded;
use crate::kind::Kind;
use crate::source::Source;
use crate::yaml::{Node, Span, Value};

/// A variable set in the file before a script runs.
#[derive(Debug, Clone)]
pub struct Var {
    pub name: String,
    /// Its value as written; `None` when it is not a plain string (a GitHub expression
    /// `${{ … }}`, a mapping, a sequence).
    pub value: Option<String>,
    /// Where the value is written.
    pub span: Span,
}

/// One script a pipeline runs.
#[derive(Debug, Clone)]
pub struct Script {
    pub text: Embedded,
    /// The YAML field path of the scalar (`jobs.deploy.steps[2].run`, `deploy.script[0]`);
    /// empty for a script file.
    pub field: String,
    /// Variables known before it runs, outermost first (a later one with the same name wins).
    pub env: Vec<Var>,
    /// The directory it runs in, relative to the repository root, when the file says.
    pub working_directory: Option<String>,
    /// Scripts of one job with the same session run in one shell (GitLab's `before_script`
    /// and `script`): a variable assigned in one is set in the next.
    pub session: usize,
}

/// One job (a workflow job, a GitLab job, a script file), its scripts in the order they run.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    pub scripts: Vec<Script>,
    /// A GitLab job whose `artifacts: reports: dotenv` sets variables of later jobs.
    pub dotenv: bool,
}

/// A pipeline or script file as rules see it.
#[derive(Debug)]
pub struct Pipeline<'a> {
    pub kind: Kind,
    pub source: usize,
    pub file: &'a str,
    /// The repository root `kubectl apply -f` paths are relative to: the directory above
    /// `.github/workflows`, the one holding `.gitlab-ci.yml`, a script's own directory.
    pub root: String,
    pub jobs: Vec<Job>,
    /// What the pipeline rules found, worked out once for all of them (the manifests a job
    /// applies are read and parsed once).
    pub(crate) facts: std::cell::OnceCell<Vec<crate::rules::pipeline::Facts>>,
}

/// GitLab CI's top-level keywords that are not jobs.
const GITLAB_KEYWORDS: &[&str] = &[
    "default",
    "include",
    "stages",
    "variables",
    "workflow",
    "image",
    "services",
    "cache",
    "before_script",
    "after_script",
    "types",
    "spec",
];

/// `extends` and `!reference` chains deeper than this are not followed (GitLab's own limit
/// is 11 levels of `extends`, 10 of nested `!reference`).
const MAX_CHAIN: usize = 11;

impl<'a> Pipeline<'a> {
    /// The pipeline in a source of a pipeline kind (`None` for manifests).
    pub fn build(kind: Kind, index: usize, src: &'a Source, roots: &[&Node]) -> Option<Self> {
        let root = repo_root(kind, &src.name);
        let jobs = match kind {
            Kind::Manifests => return None,
            Kind::ShellScript => {
                let text = Embedded::file(&src.text)?;
                vec![Job {
                    name: String::new(),
                    dotenv: false,
                    scripts: vec![Script {
                        text,
                        field: String::new(),
                        env: Vec::new(),
                        working_directory: None,
                        session: 0,
                    }],
                }]
            }
            Kind::GithubWorkflow => roots.iter().flat_map(|r| github(src, r)).collect(),
            Kind::GitlabCi => roots.iter().flat_map(|r| gitlab(src, r)).collect(),
        };
        Some(Pipeline {
            kind,
            source: index,
            file: &src.name,
            root,
            jobs,
            facts: std::cell::OnceCell::new(),
        })
    }
}

fn repo_root(kind: Kind, name: &str) -> String {
    let path = std::path::Path::new(name);
    let up = match kind {
        Kind::GithubWorkflow => 3,
        _ => 1,
    };
    let mut p = path;
    for _ in 0..up {
        p = p.parent().unwrap_or(std::path::Path::new(""));
    }
    p.to_string_lossy().replace('\\', "/")
}

fn vars_of(node: Option<&Node>, out: &mut Vec<Var>) {
    let Some(node) = node else { return };
    for e in node.as_map() {
        let Some(name) = e.key.as_str() else { continue };
        // GitLab: `NAME: {value: …, description: …}`.
        let v = match &e.value.value {
            Value::Map(_) => e.value.get("value").unwrap_or(&e.value),
            _ => &e.value,
        };
        let value = v
            .as_str()
            .filter(|s| !s.contains("${{"))
            .map(str::to_string);
        out.push(Var {
            name: name.to_string(),
            value,
            span: v.span,
        });
    }
}

fn str_of<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.get(key).and_then(Node::as_str)
}

fn github(src: &Source, root: &Node) -> Vec<Job> {
    let mut base_env = Vec::new();
    vars_of(root.get("env"), &mut base_env);
    let wf_wd = root
        .at(&["defaults", "run"])
        .and_then(|r| str_of(r, "working-directory"));
    let mut out = Vec::new();
    for j in root.get("jobs").map(Node::as_map).unwrap_or_default() {
        let Some(id) = j.key.as_str() else { continue };
        let mut env = base_env.clone();
        vars_of(j.value.get("env"), &mut env);
        let job_wd = j
            .value
            .at(&["defaults", "run"])
            .and_then(|r| str_of(r, "working-directory"))
            .or(wf_wd);
        let mut scripts = Vec::new();
        let steps = j.value.get("steps").map(Node::as_seq).unwrap_or_default();
        for (i, step) in steps.iter().enumerate() {
            let Some(run) = step.get("run") else { continue };
            let Some(text) = Embedded::scalar(src, run) else {
                continue;
            };
            let mut step_env = env.clone();
            vars_of(step.get("env"), &mut step_env);
            scripts.push(Script {
                text,
                field: format!("jobs.{id}.steps[{i}].run"),
                env: step_env,
                working_directory: str_of(step, "working-directory")
                    .or(job_wd)
                    .map(str::to_string),
                // Every step is a shell of its own.
                session: i,
            });
        }
        out.push(Job {
            name: id.to_string(),
            scripts,
            dotenv: false,
        });
    }
    out
}

/// A GitLab job's value for `key`, following `extends` (a later parent wins over an earlier
/// one, the job over its parents), within the file.
fn gitlab_get<'n>(root: &'n Node, job: &'n Node, key: &str, depth: usize) -> Option<&'n Node> {
    if let Some(v) = job.get(key) {
        return Some(v);
    }
    if depth >= MAX_CHAIN {
        return None;
    }
    parents(root, job)
        .into_iter()
        .rev()
        .find_map(|p| gitlab_get(root, p, key, depth + 1))
}

fn parents<'n>(root: &'n Node, job: &'n Node) -> Vec<&'n Node> {
    let names: Vec<&str> = match job.get("extends") {
        Some(n) if n.as_str().is_some() => n.as_str().into_iter().collect(),
        Some(n) => n.as_seq().iter().filter_map(Node::as_str).collect(),
        None => Vec::new(),
    };
    names.into_iter().filter_map(|n| root.get(n)).collect()
}

/// `variables` of a job and its parents, parents first (so the job's own win).
fn gitlab_vars(root: &Node, job: &Node, depth: usize, out: &mut Vec<Var>) {
    if depth < MAX_CHAIN {
        for p in parents(root, job) {
            gitlab_vars(root, p, depth + 1, out);
        }
    }
    vars_of(job.get("variables"), out);
}

/// The scalars of a script list, `!reference [.job, key, …]` resolved within the file.
fn script_items<'n>(root: &'n Node, node: &'n Node, depth: usize, out: &mut Vec<&'n Node>) {
    if depth > MAX_CHAIN {
        return;
    }
    if node.tag.as_deref() == Some("!reference") {
        let mut target = Some(root);
        for k in node.as_seq() {
            target = match (target, k.as_str()) {
                (Some(t), Some(k)) => t.get(k),
                _ => None,
            };
        }
        if let Some(t) = target {
            script_items(root, t, depth + 1, out);
        }
        return;
    }
    match &node.value {
        Value::Scalar(_) => out.push(node),
        Value::Seq(items) => items
            .iter()
            .for_each(|i| script_items(root, i, depth + 1, out)),
        Value::Map(_) => {}
    }
}

fn gitlab(src: &Source, root: &Node) -> Vec<Job> {
    let mut global = Vec::new();
    vars_of(root.get("variables"), &mut global);
    let default = root.get("default");
    let mut out = Vec::new();
    for j in root.as_map() {
        let Some(name) = j.key.as_str() else { continue };
        if name.starts_with('.') || GITLAB_KEYWORDS.contains(&name) || !j.value.is_map() {
            continue;
        }
        let job = &j.value;
        let mut env = global.clone();
        gitlab_vars(root, job, 0, &mut env);
        let mut scripts = Vec::new();
        for (key, session) in [("before_script", 0), ("script", 0), ("after_script", 1)] {
            // A job's own (or inherited) list, else `default:`'s, else the old global one.
            let list = gitlab_get(root, job, key, 0)
                .or_else(|| default.and_then(|d| d.get(key)))
                .or_else(|| (key != "script").then(|| root.get(key)).flatten());
            let Some(list) = list else { continue };
            let mut items = Vec::new();
            script_items(root, list, 0, &mut items);
            for (i, item) in items.into_iter().enumerate() {
                let Some(text) = Embedded::scalar(src, item) else {
                    continue;
                };
                scripts.push(Script {
                    text,
                    field: format!("{name}.{key}[{i}]"),
                    env: env.clone(),
                    working_directory: None,
                    session,
                });
            }
        }
        let dotenv = gitlab_get(root, job, "artifacts", 0)
            .and_then(|a| a.at(&["reports", "dotenv"]))
            .is_some();
        out.push(Job {
            name: name.to_string(),
            scripts,
            dotenv,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Limits, load_stream};

    fn build(name: &str, text: &str) -> Vec<Job> {
        let src = Source::new(name.into(), text.into());
        let docs: Vec<_> = load_stream(text, &Limits::default())
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        let roots: Vec<&Node> = docs.iter().map(|d| &d.root).collect();
        Pipeline::build(Kind::of(name, text), 0, &src, &roots)
            .unwrap()
            .jobs
    }

    #[test]
    fn github_steps_with_env_at_three_levels() {
        let jobs = build(
            ".github/workflows/d.yml",
            "env: {A: '1'}\njobs:\n  deploy:\n    env:\n      B: ${{ github.sha }}\n    defaults: {run: {working-directory: k8s}}\n    steps:\n      - uses: actions/checkout@v4\n      - env: {C: x}\n        run: |\n          echo $A\n",
        );
        let s = &jobs[0].scripts[0];
        assert_eq!(s.field, "jobs.deploy.steps[1].run");
        let names: Vec<_> = s
            .env
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_deref()))
            .collect();
        assert_eq!(names, [("A", Some("1")), ("B", None), ("C", Some("x"))]);
        assert_eq!(s.working_directory.as_deref(), Some("k8s"));
        assert_eq!(s.text.pos(0).line, 11);
    }

    #[test]
    fn gitlab_extends_reference_and_default() {
        let jobs = build(
            ".gitlab-ci.yml",
            "variables: {G: g}\ndefault:\n  before_script: [echo default]\n.setup:\n  script:\n    - echo setup\n.base:\n  variables: {TAG: latest, X: {value: v}}\n  script: [echo base]\ndeploy:\n  extends: .base\n  variables: {X: own}\n  script:\n    - !reference [.setup, script]\n    - helm upgrade x\n",
        );
        assert_eq!(jobs.len(), 1);
        let fields: Vec<_> = jobs[0].scripts.iter().map(|s| s.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "deploy.before_script[0]",
                "deploy.script[0]",
                "deploy.script[1]"
            ]
        );
        let text: String = jobs[0].scripts[1].text.chars.iter().collect();
        assert_eq!(text, "echo setup");
        let env: Vec<_> = jobs[0].scripts[2]
            .env
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_deref()))
            .collect();
        assert_eq!(
            env,
            [
                ("G", Some("g")),
                ("TAG", Some("latest")),
                ("X", Some("v")),
                ("X", Some("own"))
            ]
        );
    }

    #[test]
    fn reference_and_extends_cycles_end() {
        let jobs = build(
            ".gitlab-ci.yml",
            ".a: {extends: .b, script: !reference [.a, script]}\n.b: {extends: .a}\nj: {extends: .b}\n",
        );
        assert!(jobs[0].scripts.is_empty());
    }
}
