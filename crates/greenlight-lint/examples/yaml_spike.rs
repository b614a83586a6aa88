//! Spike measurement: load every YAML/JSON file under a directory with the spanned loader and
//! print documents, errors, bytes and throughput. `cargo run --release --example yaml_spike -- DIR`
use greenlight_lint::yaml::{Limits, load_stream};
use std::time::Instant;

fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: yaml_spike DIR");
    let mut files = Vec::new();
    walk(std::path::Path::new(&dir), &mut files);
    let texts: Vec<String> = files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let limits = Limits::default();
    let t = Instant::now();
    let (mut docs, mut errs) = (0, 0);
    for text in &texts {
        for d in load_stream(text, &limits) {
            if d.is_ok() { docs += 1 } else { errs += 1 }
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "files {} bytes {} docs {} errors {} time {:.3}s {:.1} MB/s",
        texts.len(),
        bytes,
        docs,
        errs,
        s,
        bytes as f64 / s / 1e6
    );
}
