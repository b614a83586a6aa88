//! How an error from a library (an HTTP client, a TLS stack) is said to a person: the root
//! cause alone, or the whole chain on one line. Pure text; the clients that talk to Argo CD and
//! Prometheus share it.

/// The root cause ("Connection refused (os error 111)"), which is what a person can act on.
pub fn innermost(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(s) = cur.source() {
        cur = s;
    }
    cur.to_string()
}

/// An error and its causes in one line ("error sending request: connection refused"), a cause
/// the text already holds said once.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn the_root_cause_and_the_chain_once_each() {
        let e = E(
            "error sending request",
            Some(Box::new(E(
                "connect: connection refused",
                Some(Box::new(E("connection refused", None))),
            ))),
        );
        assert_eq!(innermost(&e), "connection refused");
        assert_eq!(
            chain(&e),
            "error sending request: connect: connection refused"
        );
    }
}
