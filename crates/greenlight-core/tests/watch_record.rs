//! A watch's body in the state file: existing users' files hold this JSON, so reading it back
//! must keep working and writing it must keep its shape. `fixtures/watch_bodies.json` holds one
//! body per state and verdict (and per cause of each), as greenlight wrote them when this test
//! was added: the judge was driven into each and the watch serialized as the store does.

use greenlight_core::judge::{State, Watch};

struct Body {
    label: String,
    body: String,
}

fn bodies() -> Vec<Body> {
    let text = include_str!("fixtures/watch_bodies.json");
    let v: Vec<serde_json::Value> = serde_json::from_str(text).expect("fixture is JSON");
    v.into_iter()
        .map(|x| Body {
            label: x["label"].as_str().expect("label").to_string(),
            body: x["body"].as_str().expect("body").to_string(),
        })
        .collect()
}

#[test]
fn every_recorded_body_reads_back_and_writes_out_byte_for_byte() {
    let bodies = bodies();
    assert_eq!(bodies.len(), 30);
    for b in &bodies {
        let w: Watch = serde_json::from_str(&b.body).unwrap_or_else(|e| panic!("{}: {e}", b.label));
        assert_eq!(serde_json::to_string(&w).unwrap(), b.body, "{}", b.label);
    }
}

#[test]
fn the_recorded_bodies_cover_every_state() {
    let states: std::collections::HashSet<State> = bodies()
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_str(&b.body).unwrap();
            State::parse(v["state"].as_str().unwrap()).unwrap()
        })
        .collect();
    assert_eq!(states.len(), 9, "{states:?}");
}
