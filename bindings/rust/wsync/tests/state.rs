//! Receiver::state and the receive modes (ABI 1.4) against a real group over UCX: version 1
//! commits, version 2 is abandoned mid-update (the group dropped). In place the registered buffer
//! holds version 2 and the state says Mixed, naming it; staged it holds version 1 throughout, and
//! changes only inside commit.
mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::*;
use wsync::{as_bytes, Buffers, Event, Group, ReceiveMode, Receiver, ReceiverState, Tensor};

const LEN: usize = 1000;

/// What the receiver saw: its state at each Commit event (before commit), after each commit, and
/// after the update that was abandoned; and the checksum of "w" at each of those moments.
#[derive(Debug, Default)]
struct Seen {
    at_commit_event: Vec<(ReceiverState, u64)>,
    after_commit: Vec<(ReceiverState, u64)>,
    after_abandon: Option<(ReceiverState, u64)>,
}

fn engine(addr: String, mode: ReceiveMode) -> Seen {
    let mut r = Receiver::builder(1, &addr)
        .group_name("rust-state")
        .receive_mode(mode)
        .timeout(Duration::from_secs(20))
        .init()
        .expect("receiver init");
    r.register("w", &[LEN as i64], vec![7f32; LEN]).unwrap();
    let sum = |r: &Receiver| checksum(r.registered("w").expect("the buffer is readable"));
    let mut seen = Seen::default();
    let mut buckets_since_commit = 0;
    loop {
        match r.next(SHORT) {
            Ok(Event::Bucket { tensors, .. }) => {
                for t in &tensors {
                    assert!(t.placed(), "{}", t.name());
                    assert_eq!(t.staged(), mode == ReceiveMode::Staged, "{}", t.name());
                }
                buckets_since_commit += 1;
            }
            Ok(Event::Commit { version }) => {
                seen.at_commit_event.push((r.state().unwrap(), sum(&r)));
                r.commit(version).unwrap();
                seen.after_commit.push((r.state().unwrap(), sum(&r)));
                buckets_since_commit = 0;
            }
            Ok(Event::Aborted) | Ok(Event::Closed) | Err(_) if buckets_since_commit > 0 => {
                seen.after_abandon = Some((r.state().unwrap(), sum(&r)));
                return seen;
            }
            Ok(Event::Aborted) => {}
            Ok(Event::Closed) => return seen,
            Err(e) => panic!("receiver: {e}"),
        }
    }
}

fn run(mode: ReceiveMode) -> Seen {
    let path = std::env::temp_dir().join(format!("wsync-rust-state-{}-{mode:?}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let path_s = path.to_str().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    let starter = thread::spawn(move || {
        let g = Group::builder(1)
            .group_name("rust-state")
            .store_addr("127.0.0.1:0")
            .option("store_addr_file", &path_s)
            .timeout(Duration::from_secs(20))
            .init();
        tx.send(()).unwrap();
        g
    });
    let addr = wait_for_file(path.to_str().unwrap());
    let receiver = thread::spawn(move || engine(addr, mode));
    rx.recv().unwrap();
    let mut g = starter.join().unwrap().expect("group init");
    let _ = std::fs::remove_file(&path);
    let v1 = contents(0, 1, LEN);
    g.send(&[Tensor::new("w", &[LEN as i64], &v1).unwrap()], SHORT).unwrap();
    g.finalize(1, SHORT).unwrap();
    let v2 = contents(0, 2, LEN);
    g.send(&[Tensor::new("w", &[LEN as i64], &v2).unwrap()], SHORT).unwrap();
    drop(g); // mid-update: version 2 never commits
    receiver.join().unwrap()
}

fn sum_of(version: u64) -> u64 {
    checksum(as_bytes(&contents(0, version, LEN)))
}

#[test]
fn staged_buffers_change_only_at_commit_and_survive_an_abandoned_update() {
    let seen = run(ReceiveMode::Staged);
    let initial = checksum(as_bytes(&vec![7f32; LEN]));
    let (at_event, before) = &seen.at_commit_event[0];
    assert_eq!(*before, initial, "staged: the buffer changed before commit");
    assert_eq!(at_event.receive_mode, ReceiveMode::Staged);
    assert_eq!(at_event.buffers, Buffers::Clean);
    assert_eq!((at_event.pending_version, at_event.committed_version), (1, 0));
    assert_eq!(at_event.touched, vec!["w".to_string()]);
    assert_eq!(at_event.staged_bytes, (LEN * 4) as u64);
    let (after, now) = &seen.after_commit[0];
    assert_eq!(*now, sum_of(1));
    assert_eq!((after.buffers, after.committed_version, after.pending_version), (Buffers::Clean, 1, 0));
    assert!(after.touched.is_empty());
    let (abandoned, now) = seen.after_abandon.as_ref().expect("version 2 was abandoned");
    assert_eq!(*now, sum_of(1), "staged: version 1 must stand bit for bit");
    assert_eq!(abandoned.buffers, Buffers::Clean);
    assert!(abandoned.touched.is_empty() && !abandoned.late_writes);
    assert_eq!(abandoned.committed_version, 1);
}

#[test]
fn in_place_buffers_report_a_mix_after_an_abandoned_update() {
    let seen = run(ReceiveMode::InPlace);
    let (at_event, now) = &seen.at_commit_event[0];
    assert_eq!(*now, sum_of(1), "in place: written as it arrived");
    assert_eq!(at_event.receive_mode, ReceiveMode::InPlace);
    assert_eq!(at_event.buffers, Buffers::Mixed);
    assert_eq!(at_event.staged_bytes, 0);
    assert_eq!(seen.after_commit[0].0.buffers, Buffers::Clean);
    let (abandoned, now) = seen.after_abandon.as_ref().expect("version 2 was abandoned");
    assert_eq!(*now, sum_of(2), "the bucket of version 2 was delivered in place");
    assert_eq!(abandoned.buffers, Buffers::Mixed);
    assert_eq!(abandoned.touched, vec!["w".to_string()]);
    assert_eq!(abandoned.committed_version, 1);
}
