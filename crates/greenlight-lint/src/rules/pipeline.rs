//! GL701–GL704: deploy commands in CI pipelines and shell scripts that ship a mutable image
//! tag, and the checks after them that cannot notice. Mutability is judged by
//! `greenlight_core::image`'s policy, the one GL001 and `greenlight guard image` use.
//!
//! Each script is read by the `shell` tokenizer and its commands run in order through a
//! small interpreter of variables: a value is known only when it is written in the file —
//! `env:` / `variables:`, an earlier assignment or `export` in the same shell — and anything
//! else (`${{ github.sha }}`, `$CI_COMMIT_SHA`, `$(git rev-parse …)`, an unset variable) is
//! unknown and never flagged. Commands after something the tokenizer could not read are not
//! looked at.
//! Must never: read a file except through [`Settings::read_manifests`](super::Settings), or
//! flag a value it does not know.

use super::{Check, Docs, Emit, Rule, Settings};
use crate::diagnostic::{Location, Severity};
use crate::embedded::Embedded;
use crate::kind::Kind;
use crate::object::{Object, Workload};
use crate::pipeline::{Job, Pipeline, Script};
use crate::shell::{self, Command, Unit, Word};
use crate::yaml::Span;
use greenlight_core::image::{ImageRef, TagVerdict};
use std::collections::HashMap;

const FIX_TAG: &str = "deploy an immutable tag — `sha-<short sha>` from the commit \
    (`${{ github.sha }}`, `$CI_COMMIT_SHA`) or a version — or pin the digest \
    (`greenlight guard image --resolve <ref>` prints `<ref>@sha256:…`)";

const FIX_CHECK: &str = "compare the digest the pods run (`kubectl get pods -l <selector> -o \
    jsonpath='{.items[*].status.containerStatuses[*].imageID}'`) with the digest you built \
    (`greenlight guard image --resolve <ref>`), and deploy an immutable tag or digest";

pub const DEPLOYS_MUTABLE_TAG: Rule = Rule {
    id: "GL701",
    name: "pipeline-deploys-mutable-tag",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A pipeline or script deploys a mutable image tag (helm --set, kubectl set image)",
    docs: Docs {
        what: "Reads GitHub Actions workflows (`.github/workflows/*.yml`: each step's `run:`), \
               GitLab CI files (`.gitlab-ci.yml`: `before_script`, `script`, `after_script`, \
               with `extends`, `default:` and `!reference` resolved within the file) and shell \
               scripts (`*.sh`, or an `sh`/`bash` shebang), and flags `helm upgrade` / `helm \
               install` with `--set` or `--set-string` of an image tag (a key ending in \
               `image.tag`, `tag` or `imageTag`, or an `image` key holding a whole reference) \
               whose value is mutable by GL001's policy; `helm upgrade --reuse-values` without \
               a tag when an earlier command of the file set a mutable one for that release; and \
               `kubectl set image … <container>=<mutable reference>`. A value is judged when it \
               is written in the file: literally, or through a variable set by `env:` \
               (workflow, job, step), `variables:` or an earlier assignment or `export`. A \
               value the file does not know (`${{ github.sha }}`, `$CI_COMMIT_SHA`, a command \
               substitution, an unset variable) is never flagged. The finding is at the value \
               in the script (at the `$VAR` reference, with where the variable is set related). \
               As in GL001, a tag that names no version but is no known floating name (`blue`) \
               is a `warning`, and `[lint] immutable-tags` declares the ones a team never \
               pushes twice.",
        why: "Deploying the same tag again renders an identical pod spec: Kubernetes starts no \
              rollout and pulls nothing, the pipeline goes green, and production keeps running \
              the previous build — or, on the next node restart, silently pulls a different one.",
        example: "- run: |\n    helm upgrade --install web ./chart \\\n      --set image.tag=latest\n",
        fix: "Deploy an immutable tag — `--set image.tag=sha-${GITHUB_SHA::7}`, \
              `$CI_COMMIT_SHA` — or the digest (`greenlight guard image --resolve <ref>` prints \
              `<ref>@sha256:…`).",
    },
    check: Check::Pipeline(check_deploys),
};

pub const APPLIES_MUTABLE_MANIFEST: Rule = Rule {
    id: "GL702",
    name: "pipeline-applies-mutable-manifest",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A pipeline or script runs kubectl apply -f on manifests with a mutable image tag",
    docs: Docs {
        what: "Flags `kubectl apply -f <path>` (`--filename`, `-R`) in the pipelines GL701 reads \
               when the manifests at that path — relative to the repository root (the \
               directory above `.github/workflows`, the one holding `.gitlab-ci.yml`, a \
               script's own directory) and the step's `working-directory` — name a container \
               image whose tag is mutable by GL001's policy. Each image is related at its line \
               in the manifest. URLs, `-f -` and `-k` are not read.",
        why: "Applying a manifest whose tag did not change is a no-op for Kubernetes even when \
              the image behind the tag did: the pipeline succeeds and nothing new runs.",
        example: "- run: kubectl apply -f k8s/\n# k8s/web.yaml: image: registry.example/web:latest\n",
        fix: "Write an immutable tag or digest into the manifest before applying (kustomize \
              `images`, `kubectl set image … @sha256:…` on the file, or a commit by the \
              pipeline), and lint the manifests too (GL001).",
    },
    check: Check::Pipeline(check_applies),
};

pub const ROLLOUT_STATUS_ONLY: Rule = Rule {
    id: "GL703",
    name: "rollout-status-only-check",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "kubectl rollout status is the only check after deploying a mutable tag",
    docs: Docs {
        what: "Flags `kubectl rollout status` in a job that earlier deployed a mutable tag \
               (GL701, GL702) when nothing in the job compares what runs with what was built \
               (no `imageID`, no `greenlight`).",
        why: "When the tag did not change, the pod spec did not change: `rollout status` reports \
              the old ReplicaSet as successfully rolled out at once. It proves that some pods \
              are ready, not that they run the build you just pushed.",
        example: "helm upgrade web ./chart --set image.tag=latest\nkubectl rollout status deploy/web\n",
        fix: FIX_CHECK,
    },
    check: Check::Pipeline(check_rollout_status),
};

pub const GREP_TAG: Rule = Rule {
    id: "GL704",
    name: "grep-tag-in-pod-spec",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "A check greps the pod spec for the deployed tag",
    docs: Docs {
        what: "Flags `kubectl get …  | grep <pattern>` (or `describe`) in a job that earlier \
               deployed a mutable tag (GL701, GL702) when the pattern holds that tag, the \
               variable it came from, or `image`.",
        why: "The pod spec says which tag was asked for, which with a mutable tag is the same \
              before and after the deploy: the grep passes whatever runs.",
        example: "kubectl get deploy web -o yaml | grep \"image: web:$TAG\"\n",
        fix: FIX_CHECK,
    },
    check: Check::Pipeline(check_grep),
};

/// Where a resolved character comes from: written at an index of the script, or from a
/// variable referenced at `start..end`.
#[derive(Debug, Clone)]
enum Origin {
    At(usize),
    Var {
        name: String,
        start: usize,
        end: usize,
    },
}

/// A word's value with the origin of each character.
#[derive(Debug, Clone)]
struct Value {
    chars: Vec<char>,
    from: Vec<Origin>,
}

impl Value {
    fn text(&self) -> String {
        self.chars.iter().collect()
    }

    fn slice(&self, a: usize, b: usize) -> Value {
        Value {
            chars: self.chars[a..b].to_vec(),
            from: self.from[a..b].to_vec(),
        }
    }

    /// Script indices `start..end` covering every character.
    fn range(&self) -> Option<(usize, usize)> {
        let mut r: Option<(usize, usize)> = None;
        for f in &self.from {
            let (a, b) = match f {
                Origin::At(i) => (*i, i + 1),
                Origin::Var { start, end, .. } => (*start, *end),
            };
            r = Some(r.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
        r
    }

    fn vars(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .from
            .iter()
            .filter_map(|f| match f {
                Origin::Var { name, .. } => Some(name.as_str()),
                Origin::At(_) => None,
            })
            .collect();
        v.dedup();
        v
    }

    /// Split at literal characters `sep` written in the script.
    fn split(&self, sep: char) -> Vec<Value> {
        let mut out = Vec::new();
        let mut a = 0;
        for (i, (c, f)) in self.chars.iter().zip(&self.from).enumerate() {
            if *c == sep && matches!(f, Origin::At(_)) {
                out.push(self.slice(a, i));
                a = i + 1;
            }
        }
        out.push(self.slice(a, self.chars.len()));
        out
    }

    /// `key=value` at the first literal `=`.
    fn key_value(&self) -> Option<(String, Value)> {
        let eq = self
            .chars
            .iter()
            .zip(&self.from)
            .position(|(c, f)| *c == '=' && matches!(f, Origin::At(_)))?;
        let key = self.slice(0, eq);
        if !key.from.iter().all(|f| matches!(f, Origin::At(_))) {
            return None;
        }
        Some((key.text(), self.slice(eq + 1, self.chars.len())))
    }
}

/// A variable as the interpreter knows it: its value when known, and where it was set (in
/// the pipeline file).
#[derive(Debug, Clone)]
struct Val {
    text: Option<String>,
    set_at: Span,
}

type Vars = HashMap<String, Val>;

fn resolve(units: &[Unit], vars: &Vars) -> Option<Value> {
    let mut v = Value {
        chars: Vec::new(),
        from: Vec::new(),
    };
    for u in units {
        match u {
            Unit::Char(c, i) => {
                v.chars.push(*c);
                v.from.push(Origin::At(*i));
            }
            Unit::Var(name, start, end) => {
                let text = vars.get(name)?.text.as_ref()?;
                for c in text.chars() {
                    v.chars.push(c);
                    v.from.push(Origin::Var {
                        name: name.clone(),
                        start: *start,
                        end: *end,
                    });
                }
            }
            Unit::Opaque(..) => return None,
        }
    }
    Some(v)
}

/// A deploy of a mutable reference: what GL701/GL702 report, and what GL703/GL704 look for
/// after it.
#[derive(Debug, Clone)]
struct Deploy {
    rule: &'static str,
    script: usize,
    span: Span,
    message: String,
    fix: String,
    /// Where a variable in the value is set (in the pipeline file).
    related: Vec<(Span, String)>,
    elsewhere: Vec<(Location, String)>,
    /// The mutable tag (or reference) and the variables it came through.
    tag: String,
    vars: Vec<String>,
    /// Order of the command in the job.
    order: usize,
    /// `Warning` for a tag that names no version but is no known floating name (as GL001).
    severity: Option<Severity>,
}

/// The grade of a mutable tag: a known floating name is the rule's error; a word that merely
/// names no version (`blue`) a warning, as in GL001.
fn grade(settings: &Settings, tag: &str) -> Option<Severity> {
    (!settings.tag_policy.is_known_floating(tag)).then_some(Severity::Warning)
}

/// A check after a deploy (`kubectl rollout status`, a grep of the pod spec), in job order.
#[derive(Debug, Clone)]
struct AfterCheck {
    script: usize,
    span: Span,
    order: usize,
    /// For a grep: the pattern's text when known, and its variables.
    pattern: Option<(Option<String>, Vec<String>)>,
}

#[derive(Debug, Default)]
pub(crate) struct Facts {
    deploys: Vec<Deploy>,
    rollout_status: Vec<AfterCheck>,
    greps: Vec<AfterCheck>,
    /// Something in the job compares the running image (`imageID`, greenlight).
    verifies: bool,
}

/// A Helm release's tag as set by a command of the file.
type Releases = HashMap<String, (String, Span)>;

/// The facts of a pipeline, worked out by the first pipeline rule that asks.
fn analysis<'p>(p: &'p Pipeline, settings: &Settings) -> &'p [Facts] {
    p.facts.get_or_init(|| analyze(p, settings))
}

fn analyze(p: &Pipeline, settings: &Settings) -> Vec<Facts> {
    let mut releases = Releases::new();
    // GitLab: a job's `reports: dotenv` sets variables of the jobs after it, whatever the
    // file says: every name such a job's scripts assign is not known anywhere.
    let dotenv: Vec<String> = p
        .jobs
        .iter()
        .filter(|j| j.dotenv)
        .flat_map(|j| &j.scripts)
        .flat_map(|s| assigned_names(&s.text.chars))
        .collect();
    p.jobs
        .iter()
        .map(|job| analyze_job(p, job, settings, &mut releases, &dotenv))
        .collect()
}

/// Every `NAME=` written in a script, quoted or not (`echo "TAG=…" >> $GITHUB_ENV`, a
/// here-document's `TAG=…` lines): the names a step may hand to later steps. More names than
/// are really set only make more values unknown.
fn assigned_names(chars: &[char]) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if (chars[i].is_ascii_alphabetic() || chars[i] == '_') && (i == 0 || !ident(chars[i - 1])) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            if chars.get(i) == Some(&'=') {
                out.push(chars[start..i].iter().collect());
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Mark `names` as set to something not known.
fn forget(vars: &mut Vars, names: &[String]) {
    for n in names {
        for key in [n.clone(), format!("env.{n}")] {
            if let Some(v) = vars.get_mut(&key) {
                v.text = None;
            }
        }
    }
}

/// The variables a script starts with. GitLab expands `$NAME` and `${NAME}` in a variable's
/// value from the variables before it (`$$` is a `$`); a GitHub `env:` value is taken as
/// written, so one holding `$` is not known.
fn base_vars(script: &Script, kind: Kind) -> Vars {
    let mut vars = Vars::new();
    for v in &script.env {
        let text = match (&v.value, kind) {
            (Some(t), Kind::GitlabCi) => gitlab_expand(t, &vars),
            (Some(t), _) if !t.contains('$') => Some(t.clone()),
            _ => None,
        };
        let val = Val {
            text,
            set_at: v.span,
        };
        if kind == Kind::GithubWorkflow {
            // What `${{ env.NAME }}` reads; a shell assignment never changes it.
            vars.insert(format!("env.{}", v.name), val.clone());
        }
        vars.insert(v.name.clone(), val);
    }
    vars
}

fn gitlab_expand(value: &str, vars: &Vars) -> Option<String> {
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if chars.peek() == Some(&'$') {
            chars.next();
            out.push('$');
            continue;
        }
        if braced {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&n) = chars.peek() {
            if !(n.is_ascii_alphanumeric() || n == '_') {
                break;
            }
            name.push(n);
            chars.next();
        }
        if braced && chars.next() != Some('}') {
            return None;
        }
        if name.is_empty() {
            out.push('$');
            continue;
        }
        out.push_str(vars.get(&name)?.text.as_deref()?);
    }
    Some(out)
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time",
    "sudo", "exec", "command",
];

fn assignment(w: &Word) -> Option<(String, &[Unit])> {
    let eq = w
        .units
        .iter()
        .position(|u| matches!(u, Unit::Char('=', _)))?;
    let name: String = w.units[..eq]
        .iter()
        .map(|u| match u {
            Unit::Char(c, _) => Some(*c),
            _ => None,
        })
        .collect::<Option<String>>()?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| (name, &w.units[eq + 1..]))
}

/// `NAME=value`: the value as far as it is known, set at the assignment.
fn assign(vars: &mut Vars, text: &Embedded, w: &Word, name: String, units: &[Unit]) {
    let value = resolve(units, vars).map(|v| v.text());
    vars.insert(
        name,
        Val {
            text: value,
            set_at: text.span(w.start, w.end),
        },
    );
}

fn program(w: &Word) -> Option<String> {
    let t = w.literal()?;
    Some(t.rsplit('/').next().unwrap_or("").to_string())
}

fn analyze_job(
    p: &Pipeline,
    job: &Job,
    settings: &Settings,
    releases: &mut Releases,
    dotenv: &[String],
) -> Facts {
    let mut facts = Facts::default();
    let mut vars = Vars::new();
    let mut session = None;
    let mut order = 0usize;
    // GitHub: names an earlier step may have written to `$GITHUB_ENV`.
    let mut exported: Vec<String> = dotenv.to_vec();
    for (si, script) in job.scripts.iter().enumerate() {
        if session != Some(script.session) {
            vars = base_vars(script, p.kind);
            session = Some(script.session);
        } else {
            for (k, v) in base_vars(script, p.kind) {
                vars.entry(k).or_insert(v);
            }
        }
        forget(&mut vars, &exported);
        let text: String = script.text.chars.iter().collect();
        if text.contains("GITHUB_ENV") {
            exported.extend(assigned_names(&script.text.chars));
        }
        let parsed = shell::parse(&script.text.chars);
        let mut prev: Option<&Command> = None;
        for cmd in &parsed.commands {
            order += 1;
            let mut words: &[Word] = &cmd.words;
            while words
                .first()
                .is_some_and(|w| KEYWORDS.iter().any(|k| w.is(k)))
            {
                words = &words[1..];
            }
            let all_text: Vec<String> = words.iter().filter_map(Word::literal).collect();
            if all_text
                .iter()
                .any(|t| t.contains("imageID") || t == "greenlight" || t.ends_with("/greenlight"))
            {
                facts.verifies = true;
            }
            // Assignments: alone (persistent), after export/declare (persistent), or before
            // a command (for that command only).
            let mut local = None;
            let mut k = 0;
            while k < words.len() {
                let Some((name, units)) = assignment(&words[k]) else {
                    break;
                };
                let target = local.get_or_insert_with(|| vars.clone());
                assign(target, &script.text, &words[k], name, units);
                k += 1;
            }
            let rest = &words[k..];
            if rest.is_empty() {
                if let Some(l) = local.take() {
                    vars = l;
                }
                prev = Some(cmd);
                continue;
            }
            if rest[0].literal().is_some_and(|t| {
                matches!(
                    t.as_str(),
                    "export" | "declare" | "local" | "readonly" | "typeset"
                )
            }) {
                for w in &rest[1..] {
                    if let Some((name, units)) = assignment(w) {
                        assign(&mut vars, &script.text, w, name, units);
                    }
                }
                prev = Some(cmd);
                continue;
            }
            let env = local.as_ref().unwrap_or(&vars);
            let ctx = Ctx {
                p,
                script,
                si,
                env,
                settings,
                order,
            };
            match program(&rest[0]).as_deref() {
                Some("helm") => helm(&ctx, rest, releases, &mut facts),
                Some("kubectl") => kubectl(&ctx, rest, &mut facts),
                Some("grep" | "egrep" | "fgrep")
                    if cmd.piped && prev.is_some_and(queries_pod_spec) =>
                {
                    grep(&ctx, rest, &mut facts)
                }
                _ => {}
            }
            prev = Some(cmd);
        }
    }
    facts
}

struct Ctx<'a> {
    p: &'a Pipeline<'a>,
    script: &'a Script,
    si: usize,
    env: &'a Vars,
    settings: &'a Settings,
    order: usize,
}

impl Ctx<'_> {
    /// The span of a value in the file, and where its variables are set.
    fn place(&self, v: &Value) -> Option<(Span, Vec<(Span, String)>)> {
        let (a, b) = v.range()?;
        let span = self.script.text.span(a, b);
        let mut related = Vec::new();
        for name in v.vars() {
            if let Some(val) = self.env.get(name) {
                related.push((
                    val.set_at,
                    format!(
                        "`{name}` is set to `{}` here",
                        val.text.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
        Some((span, related))
    }
}

/// Flags of helm and kubectl that take a value as the next word.
const HELM_VALUE_FLAGS: &[&str] = &[
    "-f",
    "--values",
    "-n",
    "--namespace",
    "--version",
    "--set",
    "--set-string",
    "--set-file",
    "--set-json",
    "--set-literal",
    "--timeout",
    "--kube-context",
    "--kubeconfig",
    "--repo",
    "--username",
    "--password",
    "--post-renderer",
    "--description",
    "-o",
    "--output",
    "--history-max",
    "--ca-file",
    "--cert-file",
    "--key-file",
    "--kube-apiserver",
    "--kube-token",
    "--registry-config",
    "--repository-cache",
    "--repository-config",
];
const KUBECTL_VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--cluster",
    "--user",
    "-l",
    "--selector",
    "-o",
    "--output",
    "--timeout",
    "-f",
    "--filename",
    "-c",
    "--container",
    "--server",
    "-s",
    "--token",
    "--field-manager",
];

/// Positional words after the program, skipping flags and their values.
fn positionals<'w>(words: &'w [Word], value_flags: &[&str]) -> Vec<&'w Word> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let t = words[i].literal();
        match t.as_deref() {
            Some(f) if f.starts_with('-') => {
                if value_flags.contains(&f) {
                    i += 1;
                }
            }
            _ => out.push(&words[i]),
        }
        i += 1;
    }
    out
}

/// Values of a flag: `--set X`, `--set=X` (and `-fX` for a short flag).
fn flag_values<'w>(words: &'w [Word], names: &[&str]) -> Vec<(&'w Word, usize)> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let lead: String = w
            .units
            .iter()
            .map_while(|u| match u {
                Unit::Char(c, _) => Some(*c),
                _ => None,
            })
            .collect();
        for n in names {
            if lead == *n && w.units.len() == n.chars().count() {
                if let Some(next) = words.get(i + 1) {
                    out.push((next, 0));
                }
            } else if lead.starts_with(&format!("{n}=")) {
                out.push((w, n.chars().count() + 1));
            }
        }
    }
    out
}

fn helm(ctx: &Ctx, words: &[Word], releases: &mut Releases, facts: &mut Facts) {
    let pos = positionals(&words[1..], HELM_VALUE_FLAGS);
    let Some(sub) = pos.first().and_then(|w| w.literal()) else {
        return;
    };
    if sub != "upgrade" && sub != "install" {
        return;
    }
    let release = pos
        .get(1)
        .and_then(|w| resolve(&w.units, ctx.env))
        .map(|v| v.text());
    let mut set_tag = false;
    for (w, skip) in flag_values(words, &["--set", "--set-string"]) {
        let Some(value) = resolve(&w.units[skip..], ctx.env) else {
            // Not known: when it sets an image key, the release's tag is unknown from here on.
            let key: String = w.units[skip..]
                .iter()
                .map_while(|u| match u {
                    Unit::Char(c, _) if *c != '=' => Some(*c),
                    _ => None,
                })
                .collect();
            if image_key(&key).is_some() {
                set_tag = true;
                if let Some(r) = release.as_ref() {
                    releases.remove(r);
                }
            }
            continue;
        };
        for item in value.split(',') {
            let Some((key, v)) = item.key_value() else {
                continue;
            };
            let Some(is_tag) = image_key(&key) else {
                continue;
            };
            set_tag = true;
            let text = v.text();
            let text = text.trim();
            if text.is_empty() || text.contains('@') {
                if let Some(r) = release.as_ref() {
                    releases.remove(r);
                }
                continue;
            }
            let problem = if is_tag {
                ctx.settings
                    .tag_policy
                    .is_mutable(text)
                    .then(|| format!("the mutable tag `{text}`"))
            } else {
                mutable_ref(ctx.settings, text).map(|(_, what)| what)
            };
            let Some(problem) = problem else {
                if let Some(r) = release.as_ref() {
                    releases.remove(r);
                }
                continue;
            };
            let Some((span, related)) = ctx.place(&v) else {
                continue;
            };
            if let Some(r) = release.as_ref() {
                releases.insert(r.clone(), (text.to_string(), span));
            }
            facts.deploys.push(Deploy {
                rule: DEPLOYS_MUTABLE_TAG.id,
                script: ctx.si,
                span,
                message: format!(
                    "`helm {sub}` sets `{key}` to {problem}: a redeploy of the same tag renders \
                     an identical pod spec, so Kubernetes rolls out nothing while the pipeline \
                     reports success"
                ),
                fix: FIX_TAG.to_string(),
                related,
                elsewhere: Vec::new(),
                tag: text.to_string(),
                vars: v.vars().into_iter().map(str::to_string).collect(),
                order: ctx.order,
                severity: grade(ctx.settings, text),
            });
        }
    }
    let reuse = words.iter().find(|w| w.is("--reuse-values"));
    if let (Some(reuse), false, Some(r)) = (reuse, set_tag, release.as_ref())
        && let Some((tag, at)) = releases.get(r).cloned()
    {
        facts.deploys.push(Deploy {
            rule: DEPLOYS_MUTABLE_TAG.id,
            script: ctx.si,
            span: ctx.script.text.span(reuse.start, reuse.end),
            message: format!(
                "`helm upgrade {r} --reuse-values` keeps the mutable tag `{tag}` set earlier: \
                 the upgrade renders the same image reference, so nothing new rolls out"
            ),
            fix: FIX_TAG.to_string(),
            related: vec![(at, format!("`{tag}` is set for release `{r}` here"))],
            elsewhere: Vec::new(),
            severity: grade(ctx.settings, &tag),
            tag,
            vars: Vec::new(),
            order: ctx.order,
        });
    }
}

/// Whether a Helm value key names an image tag (`Some(true)`: `…image.tag`, `…tag`,
/// `…imageTag`) or a whole image reference (`Some(false)`: `…image`).
fn image_key(key: &str) -> Option<bool> {
    let last = key.rsplit('.').next().unwrap_or("");
    if last == "tag" || last == "imageTag" {
        Some(true)
    } else if last == "image" {
        Some(false)
    } else {
        None
    }
}

/// A whole image reference that is mutable: the reference and what is wrong with it.
fn mutable_ref(settings: &Settings, text: &str) -> Option<(ImageRef, String)> {
    if super::image::placeholder(text).is_some() {
        return None;
    }
    let image = ImageRef::parse(text).ok()?;
    match settings.tag_policy.judge(&image) {
        TagVerdict::MutableTag { tag } => {
            let what = format!("`{}`, whose tag `{tag}` is mutable", image.as_str());
            Some((image, what))
        }
        TagVerdict::MissingTag => {
            let what = format!(
                "`{}`, which has no tag and so means `latest`",
                image.as_str()
            );
            Some((image, what))
        }
        _ => None,
    }
}

fn kubectl(ctx: &Ctx, words: &[Word], facts: &mut Facts) {
    let pos = positionals(&words[1..], KUBECTL_VALUE_FLAGS);
    let sub: Vec<String> = pos.iter().take(2).filter_map(|w| w.literal()).collect();
    match sub
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["set", "image", ..] => {
            for w in pos.iter().skip(2) {
                let Some(v) = resolve(&w.units, ctx.env) else {
                    continue;
                };
                let Some((container, image)) = v.key_value() else {
                    continue;
                };
                let text = image.text();
                let Some((image_ref, problem)) = mutable_ref(ctx.settings, text.trim()) else {
                    continue;
                };
                let Some((span, related)) = ctx.place(&image) else {
                    continue;
                };
                let name = image_ref.written_name();
                facts.deploys.push(Deploy {
                    rule: DEPLOYS_MUTABLE_TAG.id,
                    script: ctx.si,
                    span,
                    message: format!(
                        "`kubectl set image` sets container `{container}` to {problem}: the \
                         same reference can point at new content, so setting it again rolls \
                         out nothing"
                    ),
                    fix: format!(
                        "set an immutable reference: `{container}={name}@sha256:<digest>` \
                         (`greenlight guard image --resolve {}` prints it) or \
                         `{container}={name}:sha-<short sha>`",
                        image_ref.as_str()
                    ),
                    related,
                    elsewhere: Vec::new(),
                    tag: image_ref.tag().unwrap_or("latest").to_string(),
                    vars: image.vars().into_iter().map(str::to_string).collect(),
                    order: ctx.order,
                    severity: grade(ctx.settings, image_ref.tag().unwrap_or("latest")),
                });
            }
        }
        ["apply", ..] => apply(ctx, words, facts),
        ["rollout", "status", ..] => {
            let (a, b) = (pos[0].start, pos[1].end);
            facts.rollout_status.push(AfterCheck {
                script: ctx.si,
                span: ctx.script.text.span(a, b),
                order: ctx.order,
                pattern: None,
            });
        }
        _ => {}
    }
}

/// `kubectl get|describe` of something that shows a pod spec.
fn queries_pod_spec(cmd: &Command) -> bool {
    let Some(first) = cmd.words.first() else {
        return false;
    };
    if program(first).as_deref() != Some("kubectl") {
        return false;
    }
    let pos = positionals(&cmd.words[1..], KUBECTL_VALUE_FLAGS);
    pos.first()
        .and_then(|w| w.literal())
        .is_some_and(|v| v == "get" || v == "describe")
}

fn grep(ctx: &Ctx, words: &[Word], facts: &mut Facts) {
    let mut pattern = None;
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        match w.literal().as_deref() {
            Some("-e" | "--regexp") => {
                pattern = words.get(i + 1);
                break;
            }
            Some(f) if f.starts_with('-') => {}
            _ => {
                pattern = Some(w);
                break;
            }
        }
        i += 1;
    }
    let Some(pattern) = pattern else { return };
    let vars: Vec<String> = pattern
        .units
        .iter()
        .filter_map(|u| match u {
            Unit::Var(n, _, _) => Some(n.clone()),
            _ => None,
        })
        .collect();
    let text = resolve(&pattern.units, ctx.env).map(|v| v.text());
    facts.greps.push(AfterCheck {
        script: ctx.si,
        span: ctx.script.text.span(words[0].start, pattern.end),
        order: ctx.order,
        pattern: Some((text, vars)),
    });
}

fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

fn apply(ctx: &Ctx, words: &[Word], facts: &mut Facts) {
    let recursive = words.iter().any(|w| w.is("-R") || w.is("--recursive"));
    for (w, skip) in flag_values(words, &["-f", "--filename"]) {
        let Some(v) = resolve(&w.units[skip..], ctx.env) else {
            continue;
        };
        let path = v.text();
        if path.is_empty() || path == "-" || path.contains("://") || path.starts_with('/') {
            continue;
        }
        let mut parts = vec![ctx.p.root.as_str()];
        if let Some(wd) = &ctx.script.working_directory {
            if wd.starts_with('/') || wd.contains('$') {
                continue;
            }
            parts.push(wd);
        }
        parts.push(&path);
        parts.retain(|p| !p.is_empty());
        let full = normalize(&parts.join("/"));
        if full.starts_with("..") {
            continue;
        }
        let Some((span, related)) = ctx.place(&v) else {
            continue;
        };
        for (file, text) in (ctx.settings.read_manifests)(std::path::Path::new(&full), recursive) {
            for (image, location) in mutable_images(ctx.settings, &file, &text) {
                let (image_ref, problem) = image;
                facts.deploys.push(Deploy {
                    rule: APPLIES_MUTABLE_MANIFEST.id,
                    script: ctx.si,
                    span,
                    message: format!(
                        "`kubectl apply -f {path}` applies {problem} ({}): applying an \
                         unchanged tag rolls out nothing, whatever the image behind it is now",
                        location.display()
                    ),
                    fix: format!(
                        "pin `{}` to an immutable tag or digest in {} before applying \
                         (`greenlight guard image --resolve {}` prints the digest)",
                        image_ref.as_str(),
                        location.file,
                        image_ref.as_str()
                    ),
                    related: related.clone(),
                    elsewhere: vec![(
                        location,
                        format!("`{}` is written here", image_ref.as_str()),
                    )],
                    tag: image_ref.tag().unwrap_or("latest").to_string(),
                    vars: Vec::new(),
                    order: ctx.order,
                    severity: grade(ctx.settings, image_ref.tag().unwrap_or("latest")),
                });
            }
        }
    }
}

/// The mutable container images of a manifest file, with their locations.
fn mutable_images(
    settings: &Settings,
    file: &str,
    text: &str,
) -> Vec<((ImageRef, String), Location)> {
    let mut out = Vec::new();
    let docs: Vec<crate::yaml::Document> = crate::yaml::load_stream(text, &Default::default())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    for d in &docs {
        let mut objects = Vec::new();
        Object::collect(&d.root, 0, &mut objects);
        for o in &objects {
            for w in Workload::all(o) {
                for c in w.all_containers() {
                    let Some(e) = c.node.entry("image") else {
                        continue;
                    };
                    let Some(t) = e.value.as_str() else { continue };
                    if let Some(found) = mutable_ref(settings, t.trim()) {
                        let s = super::key_value_span(&e.key, &e.value);
                        let loc = Location::at(
                            file.to_string(),
                            s.start.line,
                            s.start.col,
                            s.end.line,
                            s.end.col,
                        );
                        out.push((found, loc));
                    }
                }
            }
        }
    }
    out
}

fn emit_deploy(p: &Pipeline, job: &Job, d: &Deploy, emit: &mut Emit) {
    let f = emit.in_file(
        p.source,
        d.span,
        &job.scripts[d.script].field,
        d.message.clone(),
    );
    f.fix(d.fix.clone());
    if let Some(s) = d.severity {
        f.severity(s);
    }
    for (span, m) in &d.related {
        f.related_in(p.source, *span, m.clone());
    }
    for (l, m) in &d.elsewhere {
        f.related_elsewhere(l.clone(), m.clone());
    }
}

fn check_deploys(p: &Pipeline, emit: &mut Emit) {
    for (job, facts) in p.jobs.iter().zip(analysis(p, emit.settings)) {
        for d in facts
            .deploys
            .iter()
            .filter(|d| d.rule == DEPLOYS_MUTABLE_TAG.id)
        {
            emit_deploy(p, job, d, emit);
        }
    }
}

fn check_applies(p: &Pipeline, emit: &mut Emit) {
    for (job, facts) in p.jobs.iter().zip(analysis(p, emit.settings)) {
        for d in facts
            .deploys
            .iter()
            .filter(|d| d.rule == APPLIES_MUTABLE_MANIFEST.id)
        {
            emit_deploy(p, job, d, emit);
        }
    }
}

fn check_rollout_status(p: &Pipeline, emit: &mut Emit) {
    for (job, facts) in p.jobs.iter().zip(analysis(p, emit.settings)) {
        if facts.verifies {
            continue;
        }
        for c in &facts.rollout_status {
            let Some(d) = facts.deploys.iter().find(|d| d.order < c.order) else {
                continue;
            };
            emit.in_file(
                p.source,
                c.span,
                &job.scripts[c.script].field,
                format!(
                    "`kubectl rollout status` is the only check after deploying the mutable tag \
                     `{}`: when the tag did not change, neither did the pod spec, and rollout \
                     status reports the pods already running as rolled out",
                    d.tag
                ),
            )
            .fix(FIX_CHECK)
            .related_in(p.source, d.span, "the mutable tag is deployed here");
        }
    }
}

fn check_grep(p: &Pipeline, emit: &mut Emit) {
    for (job, facts) in p.jobs.iter().zip(analysis(p, emit.settings)) {
        for c in &facts.greps {
            let Some((text, vars)) = &c.pattern else {
                continue;
            };
            let d = facts
                .deploys
                .iter()
                .filter(|d| d.order < c.order)
                .find(|d| {
                    text.as_deref()
                        .is_some_and(|t| t.contains(&d.tag) || t.contains("image"))
                        || vars.iter().any(|v| d.vars.contains(v))
                });
            let Some(d) = d else { continue };
            emit.in_file(
                p.source,
                c.span,
                &job.scripts[c.script].field,
                format!(
                    "this grep of the pod spec for the deployed tag `{}` passes whatever runs: \
                     the spec names the tag asked for, not the image the pods pulled",
                    d.tag
                ),
            )
            .fix(FIX_CHECK)
            .related_in(p.source, d.span, "the mutable tag is deployed here");
        }
    }
}
