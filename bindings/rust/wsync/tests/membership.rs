//! Option membership=elastic (ABI 1.5) against a real group over UCX: with commit_quorum=1, rank 2
//! leaves once the group is up; the group removes it between updates and names it in a member
//! event; both updates commit on rank 1, and nothing is rebuilt.
mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::*;
use wsync::{Event, Group, Receiver, Tensor};

#[test]
fn elastic_membership_removes_a_receiver_that_left_and_commits_on_the_quorum() {
    let path = std::env::temp_dir().join(format!("wsync-rust-members-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let path_s = path.to_str().unwrap().to_string();
    let (up_tx, up_rx) = mpsc::channel::<()>();
    let starter = thread::spawn(move || {
        Group::builder(2)
            .group_name("rust-members")
            .store_addr("127.0.0.1:0")
            .option("store_addr_file", &path_s)
            .option("membership", "elastic")
            .option("commit_quorum", "1")
            .timeout(Duration::from_secs(20))
            .init()
    });
    let addr = wait_for_file(path.to_str().unwrap());
    let join = |rank: u32, addr: &str| {
        Receiver::builder(rank, addr).group_name("rust-members").timeout(Duration::from_secs(20)).init()
    };
    let a1 = addr.clone();
    let stays = thread::spawn(move || {
        let mut r = join(1, &a1).expect("rank 1 joins");
        let mut commits = 0;
        loop {
            match r.next(SHORT).expect("rank 1") {
                Event::Commit { version } => {
                    r.commit(version).unwrap();
                    commits += 1;
                }
                Event::Closed => return commits,
                _ => {}
            }
        }
    });
    let leaves = thread::spawn(move || {
        let r = join(2, &addr).expect("rank 2 joins");
        up_rx.recv().unwrap(); // the group is up: now leave, as a crashed engine would
        drop(r);
    });
    let mut g = starter.join().unwrap().expect("group init");
    let _ = std::fs::remove_file(&path);
    up_tx.send(()).unwrap();
    leaves.join().unwrap();
    // The group notices the closed connection between updates and removes rank 2 then.
    for _ in 0..200 {
        if g.members().unwrap() == vec![1] {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(g.members().unwrap(), vec![1], "rank 2 was not removed between updates");
    for version in 1..=2u64 {
        let w = contents(0, version, 1024);
        g.send(&[Tensor::new("w", &[1024], &w).unwrap()], SHORT).unwrap();
        g.finalize(version, SHORT).unwrap();
    }
    let events = g.member_events().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert!(e.left && e.rank == 2 && e.update == 1, "{e:?}");
    assert_eq!(e.status, "WSYNC_ERR_PEER_FAILED", "{e:?}");
    assert!(e.reason.contains("receiver rank 2"), "{e:?}");
    assert!(g.member_events().unwrap().is_empty());
    assert_eq!(g.members().unwrap(), vec![1]);
    let s = g.stats().unwrap();
    assert_eq!((s.committed_version, s.members, s.members_left), (2, 1, 1));
    drop(g);
    assert_eq!(stays.join().unwrap(), 2);
}
