//! The log callback is process-wide: its test runs in a binary of its own, so no other test's
//! lines reach it and its panicking callback reaches no other test.
mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use common::*;
use wsync::{Event, Group};

#[test]
fn log_lines_reach_the_callback_and_a_panicking_callback_is_contained() {
    let lines = Arc::new(Mutex::new(Vec::<(wsync::Level, String)>::new()));
    let sink = Arc::clone(&lines);
    wsync::set_log_callback(
        move |level, msg| sink.lock().unwrap().push((level, msg.to_string())),
        wsync::Level::Debug,
    );
    let _ = Group::builder(1).option("no_such_key", "1").init();
    let (g, rx) =
        group_with(1, &[], |_, mut r| while !matches!(r.next(SHORT), Ok(Event::Closed) | Err(_)) {});
    drop(g);
    rx.into_iter().next().unwrap().join().unwrap();
    assert!(!lines.lock().unwrap().is_empty(), "no log line arrived at debug level");
    assert!(lines.lock().unwrap().iter().all(|(l, _)| *l <= wsync::Level::Debug));

    // A callback that panics: the panic stays in Rust (it must not unwind into C) and wsync goes on.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    wsync::set_log_callback(
        move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            panic!("a callback that panics");
        },
        wsync::Level::Debug,
    );
    let (mut g, rx) = group_with(1, &[], |_, mut r| loop {
        match r.next(SHORT) {
            Ok(Event::Commit { version }) => r.commit(version).unwrap(),
            Ok(Event::Closed) | Err(_) => return r.committed_version(),
            _ => {}
        }
    });
    g.finalize(1, SHORT).unwrap();
    drop(g);
    assert_eq!(rx.into_iter().next().unwrap().join().unwrap(), 1);
    wsync::reset_log_callback();
    assert!(calls.load(Ordering::SeqCst) > 0, "the panicking callback was never called");
}
