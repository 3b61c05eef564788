//! Many senders (ABI 1.5) through the Rust binding, over UCX: two sender threads each publish their
//! rows of "w" (a slice) and the same "b" (a replica); two receivers register the full tensors
//! and must hold every byte of each version after its commit, the plan computed once per sender.
mod common;

use std::thread;
use std::time::Duration;

use common::*;
use wsync::{Event, Group, Receiver, Tensor};

const ROWS: usize = 10; // over 2 senders: 5 and 5
const COLS: usize = 7;
const VERSIONS: u64 = 2;

fn full_w(version: u64) -> Vec<f32> {
    contents(0, version, ROWS * COLS)
}

fn full_b(version: u64) -> Vec<f32> {
    contents(1, version, COLS)
}

fn sender(rank: u32, dir: String) -> u64 {
    let s0 = format!("{dir}/s0.addr");
    let mut b = Group::builder(2)
        .group_name("rust-senders")
        .store_addr("127.0.0.1:0")
        .timeout(Duration::from_secs(20))
        .option("num_senders", "2")
        .option("sender_rank", &rank.to_string());
    b = if rank == 0 { b.option("store_addr_file", &s0) } else { b.option("sender0_store", &wait_for_file(&s0)) };
    let mut g = b.init().expect("sender init");
    let half = ROWS / 2;
    let begin = rank as usize * half;
    for v in 1..=VERSIONS {
        let w = full_w(v)[begin * COLS..(begin + half) * COLS].to_vec();
        let bias = full_b(v);
        let tensors = [
            Tensor::new("w", &[half as i64, COLS as i64], &w)
                .and_then(|t| t.slice(&[ROWS as i64, COLS as i64], &[begin as i64, 0]))
                .expect("a slice"),
            Tensor::new("b", &[COLS as i64], &bias).expect("a tensor").replica(),
        ];
        g.send(&tensors, SHORT).expect("send");
        g.finalize(v, SHORT).expect("finalize");
    }
    g.stats().expect("stats").plans_computed
}

fn engine(rank: u32, addr: String) -> u64 {
    let mut r = Receiver::builder(rank, &addr)
        .group_name("rust-senders")
        .timeout(Duration::from_secs(20))
        .init()
        .expect("receiver init");
    r.register("w", &[ROWS as i64, COLS as i64], vec![0f32; ROWS * COLS]).unwrap();
    r.register("b", &[COLS as i64], vec![0f32; COLS]).unwrap();
    loop {
        match r.next(SHORT).expect("next") {
            Event::Commit { version } => {
                r.commit(version).unwrap();
                assert_eq!(r.registered_as::<f32>("w").unwrap(), &full_w(version)[..], "w at version {version}");
                assert_eq!(r.registered_as::<f32>("b").unwrap(), &full_b(version)[..], "b at version {version}");
            }
            Event::Closed => return r.committed_version(),
            _ => {}
        }
    }
}

#[test]
fn two_senders_publish_slices_and_receivers_get_the_whole_tensors() {
    let dir = std::env::temp_dir().join(format!("wsync-rust-senders-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.to_string_lossy().into_owned();
    let senders: Vec<_> = (0..2).map(|k| { let d = dir.clone(); thread::spawn(move || sender(k, d)) }).collect();
    let addr = wait_for_file(&format!("{dir}/s0.addr"));
    let engines: Vec<_> = (1..=2).map(|r| { let a = addr.clone(); thread::spawn(move || engine(r, a)) }).collect();
    for s in senders {
        assert_eq!(s.join().expect("sender"), 1, "one batch per update, the same each time: one plan");
    }
    for e in engines {
        assert_eq!(e.join().expect("engine"), VERSIONS);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_slice_that_does_not_fit_is_refused() {
    let data = vec![0f32; 6];
    let err = Tensor::new("w", &[2, 3], &data).unwrap().slice(&[3, 3], &[2, 0]).err().expect("refused");
    assert!(err.to_string().contains("does not fit"), "{err}");
}
