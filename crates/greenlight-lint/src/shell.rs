//! A small shell tokenizer: the subset of POSIX sh / bash that deploy scripts are written in,
//! enough to find commands and their arguments with every character's place in the script.
//!
//! Understood: words, single and double quotes, backslash escapes, `\` line continuations,
//! comments, the separators `;`, `&`, `&&`, `||`, `|`, `(`, `)` and line breaks, `$VAR` and
//! `${VAR}` and GitHub's `${{ env.VAR }}` (kept as references, named `VAR` and `env.VAR`,
//! resolved later against what the file sets), redirections
//! (`>`, `>>`, `2>&1`, `<`, their target dropped) and here-documents (their body skipped).
//! Kept opaque (a value that is never known): `$( … )`, `` ` … ` ``, `$(( … ))`, `${VAR:-x}`
//! and other parameter expansions, `$1`, `$@`, `$?`, and GitHub expressions `${{ … }}`.
//! Not understood: `case` patterns, functions and aliases (their bodies read as commands),
//! `eval`, brace and glob expansion (taken literally), arrays. An unterminated quote or
//! substitution ends the parse: commands before it are returned, nothing from it on, and
//! [`Parsed::stopped`] says where.
//! Must never: panic, recurse on input depth, or report a command it did not read whole.

/// One unit of a word: a character written in the script, a variable reference, or something
/// whose value is never known here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// A literal character and its index in the script.
    Char(char, usize),
    /// `$NAME` / `${NAME}`: the name and the reference's indices `start..end`.
    Var(String, usize, usize),
    /// A substitution or expansion whose value is not known: indices `start..end`.
    Opaque(usize, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub units: Vec<Unit>,
    /// Indices of the word in the script, `start..end`.
    pub start: usize,
    pub end: usize,
}

impl Word {
    /// The word's text when it is all literal characters.
    pub fn literal(&self) -> Option<String> {
        self.units
            .iter()
            .map(|u| match u {
                Unit::Char(c, _) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// Whether the word is exactly this literal text.
    pub fn is(&self, text: &str) -> bool {
        self.literal().as_deref() == Some(text)
    }
}

/// One simple command: its words, and whether its input is piped from the previous command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub words: Vec<Word>,
    pub piped: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub commands: Vec<Command>,
    /// Where reading stopped at something not understood (an unterminated quote), with what;
    /// `None` when the whole script was read.
    pub stopped: Option<(usize, &'static str)>,
}

/// Tokenize a script.
pub fn parse(s: &[char]) -> Parsed {
    let mut p = Parser {
        s,
        i: 0,
        out: Parsed::default(),
        words: Vec::new(),
        piped: false,
        heredocs: Vec::new(),
    };
    if let Err((at, what)) = p.run() {
        p.out.stopped = Some((at, what));
    }
    p.out
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    out: Parsed,
    words: Vec<Word>,
    piped: bool,
    /// Here-document delimiters (and whether `<<-`) whose bodies start at the next line.
    heredocs: Vec<(String, bool)>,
}

type Fail = (usize, &'static str);

impl Parser<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn end_command(&mut self, next_piped: bool) {
        if !self.words.is_empty() {
            self.out.commands.push(Command {
                words: std::mem::take(&mut self.words),
                piped: self.piped,
            });
        }
        self.piped = next_piped;
    }

    fn run(&mut self) -> Result<(), Fail> {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' => self.i += 1,
                '\\' if self.peek(1) == Some('\n') => self.i += 2,
                '\n' => {
                    self.i += 1;
                    self.end_command(false);
                    self.skip_heredocs();
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                ';' | '(' | ')' => {
                    self.i += 1;
                    self.end_command(false);
                }
                '&' => {
                    self.i += if self.peek(1) == Some('&') { 2 } else { 1 };
                    self.end_command(false);
                }
                '|' => {
                    let or = self.peek(1) == Some('|');
                    self.i += if or { 2 } else { 1 };
                    self.end_command(!or);
                }
                '<' | '>' => self.redirection()?,
                _ => {
                    let w = self.word()?;
                    // `2>file`: a descriptor number written against its redirection.
                    let fd = matches!(self.peek(0), Some('<' | '>'))
                        && w.literal()
                            .is_some_and(|t| t.chars().all(|c| c.is_ascii_digit()));
                    if !fd {
                        self.words.push(w);
                    }
                }
            }
        }
        self.end_command(false);
        Ok(())
    }

    /// `<`, `>`, `>>`, `>&`, `<<<`, `&>`: the operator and its target are not arguments. `<<`
    /// starts a here-document whose body is skipped.
    fn redirection(&mut self) -> Result<(), Fail> {
        if self.peek(0) == Some('<') && self.peek(1) == Some('<') && self.peek(2) != Some('<') {
            self.i += 2;
            let strip = self.peek(0) == Some('-');
            if strip {
                self.i += 1;
            }
            while matches!(self.peek(0), Some(' ' | '\t')) {
                self.i += 1;
            }
            let start = self.i;
            let w = self.word()?;
            let delim: String = w
                .units
                .iter()
                .filter_map(|u| match u {
                    Unit::Char(c, _) => Some(*c),
                    _ => None,
                })
                .collect();
            if delim.is_empty() {
                return Err((start, "a here-document without a delimiter"));
            }
            self.heredocs.push((delim, strip));
            return Ok(());
        }
        while matches!(self.peek(0), Some('<' | '>' | '&')) {
            self.i += 1;
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        if self
            .peek(0)
            .is_some_and(|c| !matches!(c, '\n' | ';' | '|' | '&'))
        {
            self.word()?;
        }
        Ok(())
    }

    /// After a line break: skip the bodies of the here-documents opened on the line.
    fn skip_heredocs(&mut self) {
        for (delim, strip) in std::mem::take(&mut self.heredocs) {
            loop {
                if self.i >= self.s.len() {
                    return;
                }
                let start = self.i;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.i += 1;
                }
                let line: String = self.s[start..self.i].iter().collect();
                if self.peek(0) == Some('\n') {
                    self.i += 1;
                }
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if line.trim_end_matches('\r') == delim {
                    break;
                }
            }
        }
    }

    fn word(&mut self) -> Result<Word, Fail> {
        let start = self.i;
        let mut units = Vec::new();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\\' => match self.peek(1) {
                    Some('\n') => self.i += 2,
                    Some(e) => {
                        units.push(Unit::Char(e, self.i + 1));
                        self.i += 2;
                    }
                    None => self.i += 1,
                },
                '\'' => {
                    let open = self.i;
                    self.i += 1;
                    loop {
                        match self.peek(0) {
                            None => return Err((open, "an unterminated single quote")),
                            Some('\'') => {
                                self.i += 1;
                                break;
                            }
                            Some(c) => {
                                units.push(Unit::Char(c, self.i));
                                self.i += 1;
                            }
                        }
                    }
                }
                '"' => {
                    let open = self.i;
                    self.i += 1;
                    loop {
                        match self.peek(0) {
                            None => return Err((open, "an unterminated double quote")),
                            Some('"') => {
                                self.i += 1;
                                break;
                            }
                            Some('\\') => match self.peek(1) {
                                Some('\n') => self.i += 2,
                                Some(e @ ('$' | '`' | '"' | '\\')) => {
                                    units.push(Unit::Char(e, self.i + 1));
                                    self.i += 2;
                                }
                                _ => {
                                    units.push(Unit::Char('\\', self.i));
                                    self.i += 1;
                                }
                            },
                            Some('$') => units.push(self.dollar()?),
                            Some('`') => units.push(self.backtick()?),
                            Some(c) => {
                                units.push(Unit::Char(c, self.i));
                                self.i += 1;
                            }
                        }
                    }
                }
                '$' => units.push(self.dollar()?),
                '`' => units.push(self.backtick()?),
                _ => {
                    units.push(Unit::Char(c, self.i));
                    self.i += 1;
                }
            }
        }
        Ok(Word {
            units,
            start,
            end: self.i,
        })
    }

    fn backtick(&mut self) -> Result<Unit, Fail> {
        let open = self.i;
        self.i += 1;
        loop {
            match self.peek(0) {
                None => return Err((open, "an unterminated backtick substitution")),
                Some('\\') => self.i += 2,
                Some('`') => {
                    self.i += 1;
                    return Ok(Unit::Opaque(open, self.i));
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// At a `$`: a variable reference, an opaque expansion, or a literal `$`.
    fn dollar(&mut self) -> Result<Unit, Fail> {
        let open = self.i;
        match self.peek(1) {
            Some('{') if self.peek(2) == Some('{') => {
                // A GitHub expression, substituted before the shell runs: `${{ env.NAME }}`
                // is the variable `env.NAME` (the workflow's `env:` as the expression sees
                // it), anything else is not known.
                self.i += 3;
                loop {
                    match self.peek(0) {
                        None => return Err((open, "an unterminated `${{` expression")),
                        Some('}') if self.peek(1) == Some('}') => {
                            let inner: String = self.s[open + 3..self.i].iter().collect();
                            self.i += 2;
                            let inner = inner.trim();
                            return Ok(match inner.strip_prefix("env.") {
                                Some(name) if is_name(name) => {
                                    Unit::Var(inner.to_string(), open, self.i)
                                }
                                _ => Unit::Opaque(open, self.i),
                            });
                        }
                        Some(_) => self.i += 1,
                    }
                }
            }
            Some('{') => {
                self.i += 2;
                let name_start = self.i;
                while self
                    .peek(0)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.i += 1;
                }
                let name: String = self.s[name_start..self.i].iter().collect();
                if self.peek(0) == Some('}') && is_name(&name) {
                    self.i += 1;
                    return Ok(Unit::Var(name, open, self.i));
                }
                self.close(open, 1, '{', '}', "an unterminated `${`")?;
                Ok(Unit::Opaque(open, self.i))
            }
            Some('(') => {
                self.i += 1;
                self.close(open, 0, '(', ')', "an unterminated `$(` substitution")?;
                Ok(Unit::Opaque(open, self.i))
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.i += 1;
                let name_start = self.i;
                while self
                    .peek(0)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.i += 1;
                }
                let name = self.s[name_start..self.i].iter().collect();
                Ok(Unit::Var(name, open, self.i))
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.i += 2;
                Ok(Unit::Opaque(open, self.i))
            }
            _ => {
                self.i += 1;
                Ok(Unit::Char('$', open))
            }
        }
    }

    /// Skip to the closing bracket, counting nesting (`depth` brackets already open) and
    /// skipping quotes.
    fn close(
        &mut self,
        open: usize,
        depth: usize,
        o: char,
        c: char,
        what: &'static str,
    ) -> Result<(), Fail> {
        let mut depth = depth;
        let mut quote: Option<char> = None;
        while let Some(ch) = self.peek(0) {
            self.i += 1;
            match (quote, ch) {
                (Some(q), ch) if ch == q => quote = None,
                (Some('"'), '\\') => self.i += 1,
                (Some(_), _) => {}
                (None, '\\') => self.i += 1,
                (None, '\'' | '"') => quote = Some(ch),
                (None, ch) if ch == o => depth += 1,
                (None, ch) if ch == c => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err((open, what))
    }
}

fn is_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(script: &str) -> Vec<Vec<String>> {
        let chars: Vec<char> = script.chars().collect();
        let p = parse(&chars);
        assert!(p.stopped.is_none(), "{p:?}");
        p.commands
            .iter()
            .map(|c| {
                c.words
                    .iter()
                    .map(|w| {
                        w.units
                            .iter()
                            .map(|u| match u {
                                Unit::Char(c, _) => c.to_string(),
                                Unit::Var(n, _, _) => format!("<{n}>"),
                                Unit::Opaque(a, b) => {
                                    format!("[{}]", chars[*a..*b].iter().collect::<String>())
                                }
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn quotes_escapes_continuations_and_separators() {
        assert_eq!(
            words(
                "helm upgrade app \\\n  --set 'a=b c' --set \"tag=$TAG\"&& echo \\\"x ; y|z # c\n"
            ),
            [
                vec![
                    "helm",
                    "upgrade",
                    "app",
                    "--set",
                    "a=b c",
                    "--set",
                    "tag=<TAG>"
                ],
                vec!["echo", "\"x"],
                vec!["y"],
                vec!["z"],
            ]
        );
    }

    #[test]
    fn expansions_and_redirections() {
        assert_eq!(
            words("X=${{ github.sha }} a $(date +%s) ${Y:-${Z}} ${W} `b` $1 2>&1 >out <in $\n"),
            [vec![
                "X=[${{ github.sha }}]",
                "a",
                "[$(date +%s)]",
                "[${Y:-${Z}}]",
                "<W>",
                "[`b`]",
                "[$1]",
                "$"
            ]]
        );
    }

    #[test]
    fn heredoc_bodies_are_skipped() {
        assert_eq!(
            words("cat <<EOF | kubectl apply -f -\nimage: x:latest\nEOF\necho done\n"),
            [
                vec!["cat"],
                vec!["kubectl", "apply", "-f", "-"],
                vec!["echo", "done"]
            ]
        );
    }

    #[test]
    fn unterminated_quote_stops_and_keeps_what_came_before() {
        let chars: Vec<char> = "echo ok\nhelm upgrade x --set tag='latest\n"
            .chars()
            .collect();
        let p = parse(&chars);
        assert_eq!(p.commands.len(), 1);
        assert_eq!(p.stopped.map(|s| s.1), Some("an unterminated single quote"));
        let chars: Vec<char> = "a $(b \"c)\" ".chars().collect();
        assert!(parse(&chars).stopped.is_some());
    }

    #[test]
    fn piped_commands_are_marked() {
        let chars: Vec<char> = "kubectl get pod -o yaml | grep image || true"
            .chars()
            .collect();
        let p = parse(&chars);
        let piped: Vec<bool> = p.commands.iter().map(|c| c.piped).collect();
        assert_eq!(piped, [false, true, false]);
    }
}
