//! The safe API against a real group: receivers on threads in this process (and, for the killed
//! receiver, the C++ sample engine as a child process), over the UCX transport on loopback.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use wsync::{as_bytes, Error, Event, Group, Receiver, Tensor};

const SIZES: [usize; 5] = [1, 1000, 3000, 0, 257];

fn shape(len: usize) -> Vec<i64> {
    vec![len as i64]
}

/// Receives until the group closes; returns (version -> checksum by tensor index) per commit.
fn receive_all(rank: u32, mut r: Receiver, register: bool) -> Vec<(u64, Vec<(String, u64)>)> {
    if register {
        for (i, len) in SIZES.iter().enumerate() {
            r.register(&format!("t{i}"), &shape(*len), vec![0f32; *len]).unwrap();
        }
    }
    let mut seen = Vec::new();
    let mut got: Vec<(String, u64)> = Vec::new();
    loop {
        match r.next(SHORT).unwrap_or_else(|e| panic!("rank {rank}: {e}")) {
            Event::Bucket { tensors, .. } => {
                for t in tensors {
                    assert_eq!(t.placed(), register, "{}", t.name());
                    got.push((t.name().to_string(), checksum(t.bytes().unwrap())));
                }
            }
            Event::Commit { version } => {
                if register {
                    got = (0..SIZES.len())
                        .map(|i| (format!("t{i}"), checksum(r.registered(&format!("t{i}")).unwrap())))
                        .collect();
                    let t1: &[f32] = r.registered_as::<f32>("t1").unwrap();
                    assert_eq!(t1[7], contents(1, version, 1000)[7]);
                }
                got.sort();
                seen.push((version, std::mem::take(&mut got)));
                r.commit(version).unwrap();
                assert_eq!(r.committed_version(), version);
            }
            Event::Closed => return seen,
            Event::Aborted => panic!("rank {rank}: unexpected abort"),
        }
    }
}

fn expected(version: u64) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = SIZES
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("t{i}"), checksum(as_bytes(&contents(i, version, *n)))))
        .collect();
    v.sort();
    v
}

#[test]
fn every_tensor_arrives_equal_and_versions_commit() {
    // Small buckets: tensors split across buckets, several buckets per batch.
    let (mut g, rx) = group_with(2, &[("bucket_bytes", "4096")], |rank, r| receive_all(rank, r, rank == 1));
    let data1: Vec<Vec<f32>> = SIZES.iter().enumerate().map(|(i, n)| contents(i, 1, *n)).collect();
    let t1: Vec<Tensor> = data1
        .iter()
        .enumerate()
        .map(|(i, d)| Tensor::new(&format!("t{i}"), &shape(d.len()), d).unwrap())
        .collect();
    g.send(&t1[..2], SHORT).unwrap();
    g.send(&t1[2..], SHORT).unwrap();
    g.finalize(1, SHORT).unwrap();

    // Version 2 through the asynchronous send: two batches in flight.
    let data2: Vec<Vec<f32>> = SIZES.iter().enumerate().map(|(i, n)| contents(i, 2, *n)).collect();
    let t2: Vec<Tensor> = data2
        .iter()
        .enumerate()
        .map(|(i, d)| Tensor::new(&format!("t{i}"), &shape(d.len()), d).unwrap())
        .collect();
    let tickets = g
        .pipeline(|p| {
            let a = p.start(&t2[..3], SHORT)?;
            let b = p.start(&t2[3..], SHORT)?;
            assert_eq!((a.ticket() + 1), b.ticket());
            while !b.wait(SHORT)? {}
            Ok((a.ticket(), b.ticket()))
        })
        .unwrap();
    assert_eq!(tickets, (3, 4));
    g.finalize(2, SHORT).unwrap();
    let s = g.stats().unwrap();
    assert_eq!((s.committed_version, s.updates, s.batches, s.num_receivers), (2, 2, 4, 2));
    assert!(s.buckets >= 4, "{s:?}");
    drop(g);
    for h in rx {
        let seen = h.join().unwrap();
        assert_eq!(seen, vec![(1, expected(1)), (2, expected(2))]);
    }
}

#[test]
fn an_unknown_option_is_refused_naming_the_key() {
    let e = Group::builder(1)
        .option("bucket_bytez", "4096")
        .timeout(Duration::from_secs(1))
        .init()
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.message().contains("bucket_bytez"), "{e}");
    assert_eq!(e.status(), wsync::sys::WSYNC_ERR_INVALID_ARGUMENT);
    assert!(e.to_string().starts_with("WSYNC_ERR_INVALID_ARGUMENT: "), "{e}");
    let e = Group::builder(1).option("timeout_ms", "soon").init().err().unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.message().contains("timeout_ms"), "{e}");
}

#[test]
fn bad_tensors_are_refused_before_any_call() {
    let d = vec![0f32; 8];
    let e = Tensor::new("w", &[3, 3], &d).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("'w'") && m.contains("36") && m.contains("32")),
        "{e}"
    );
    let e = Tensor::new("w", &[1; 9], &d[..1]).unwrap_err();
    assert!(e.message().contains("9 dimensions"), "{e}");
    let e = Tensor::new("w", &[-8], &d).unwrap_err();
    assert!(e.message().contains("negative"), "{e}");
    let e = Tensor::new("a\0b", &[8], &d).unwrap_err();
    assert!(e.message().contains("NUL"), "{e}");
    let e = Tensor::new("w", &[i64::MAX, i64::MAX], &d).unwrap_err();
    assert!(e.message().contains("overflows"), "{e}");
    let bf16 = vec![0u16; 6];
    let t = Tensor::with_dtype("b", wsync::Dtype::BFloat16, &[2, 3], as_bytes(&bf16)).unwrap();
    assert_eq!(t.name(), "b");
    // An empty tensor is legal.
    Tensor::new::<f32>("e", &[0, 4], &[]).unwrap();
}

#[test]
fn a_receiver_of_another_group_is_rejected() {
    let path = std::env::temp_dir().join(format!("wsync-rust-reject-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap().to_string();
    let group = thread::spawn(move || {
        Group::builder(1)
            .group_name("right")
            .option("store_addr_file", &p)
            .timeout(Duration::from_secs(3))
            .init()
    });
    let addr = wait_for_file(path.to_str().unwrap());
    let e =
        Receiver::builder(1, &addr).group_name("wrong").timeout(Duration::from_secs(5)).init().err().unwrap();
    assert!(matches!(e, Error::Rejected(_)), "{e}");
    assert!(e.message().contains("wrong") || e.message().contains("right"), "{e}");
    assert!(group.join().unwrap().is_err());
    let _ = std::fs::remove_file(path);
}

#[test]
fn dropping_the_group_during_an_update_tells_the_receiver() {
    let (mut g, rx) = group_with(1, &[], |_, mut r| {
        let mut events = Vec::new();
        loop {
            match r.next(SHORT).expect("the receiver must hear of the drop, not time out") {
                Event::Bucket { .. } => events.push("bucket"),
                Event::Aborted => events.push("aborted"),
                Event::Closed => {
                    events.push("closed");
                    return (events, r.committed_version());
                }
                Event::Commit { .. } => events.push("commit"),
            }
        }
    });
    let d = contents(0, 1, 100);
    g.send(&[Tensor::new("w", &[100], &d).unwrap()], SHORT).unwrap();
    drop(g); // mid-update: no finalize
    let (events, version) = rx.into_iter().next().unwrap().join().unwrap();
    assert_eq!(events.first(), Some(&"bucket"));
    assert_eq!(events.last(), Some(&"closed"));
    assert!(!events.contains(&"commit"));
    assert_eq!(version, 0);
}

#[test]
fn dropping_a_receiver_during_an_update_fails_the_sender_naming_it() {
    let (mut g, rx) = group_with(1, &[("timeout_ms", "5000")], |_, mut r| {
        let first = matches!(r.next(SHORT), Ok(Event::Bucket { .. }));
        drop(r);
        first
    });
    let d = contents(0, 1, 100);
    g.send(&[Tensor::new("a", &[100], &d).unwrap()], SHORT).unwrap();
    assert!(rx.into_iter().next().unwrap().join().unwrap());
    let t0 = Instant::now();
    let e = g
        .send(&[Tensor::new("b", &[100], &d).unwrap()], None) // None: the group's timeout_ms, 5 s
        .and_then(|_| g.finalize(1, None))
        .unwrap_err();
    eprintln!("the sender's error: {e}");
    assert!(matches!(e, Error::PeerFailed(_)), "{e}");
    assert!(e.message().contains("receiver rank 1"), "{e}");
    // Noticed from the closed connection, well before the 5 s a silent receiver would take.
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
}

#[test]
fn abort_from_another_thread_ends_a_blocked_send() {
    let release = Arc::new(AtomicBool::new(false));
    let rel = Arc::clone(&release);
    // The receiver joins but does not read, so the send waits for its acknowledgement.
    let (mut g, rx) = group_with(1, &[], move |_, r| {
        while !rel.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(10));
        }
        drop(r);
    });
    let abort = g.abort_handle();
    let aborter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        abort.abort();
        abort.abort(); // idempotent
    });
    let d = vec![1u8; 4 << 20];
    let t0 = Instant::now();
    let e = g
        .send(&[Tensor::new("big", &[d.len() as i64], &d).unwrap()], Some(Duration::from_secs(30)))
        .unwrap_err();
    assert!(matches!(e, Error::Aborted(_)), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "abort took {:?}", t0.elapsed());
    assert!(matches!(g.finalize(1, SHORT), Err(Error::Aborted(_))));
    aborter.join().unwrap();
    let late = g.abort_handle();
    drop(g);
    late.abort(); // after the group is gone: nothing happens
    release.store(true, Ordering::SeqCst);
    rx.into_iter().next().unwrap().join().unwrap();
}

#[test]
#[allow(clippy::forget_non_drop)] // the handle is leaked on purpose
fn the_pipeline_waits_for_its_batches_even_when_the_closure_fails_or_panics() {
    // The receiver calls next only with a permit; a permit comes HOLD after each pipeline starts,
    // so a pipeline that did not wait for its batch would return before HOLD has passed.
    const HOLD: Duration = Duration::from_millis(400);
    let (permit, permits) = std::sync::mpsc::channel::<()>();
    let permits = Arc::new(Mutex::new(permits));
    let (mut g, rx) = group_with(1, &[], move |rank, r| {
        let mut r = r;
        let mut buckets = 0;
        loop {
            permits.lock().unwrap().recv().unwrap();
            match r.next(SHORT).unwrap_or_else(|e| panic!("rank {rank}: {e}")) {
                Event::Bucket { .. } => buckets += 1,
                Event::Commit { version } => r.commit(version).unwrap(),
                Event::Closed => return buckets,
                Event::Aborted => panic!("aborted"),
            }
        }
    });
    let later = |permit: std::sync::mpsc::Sender<()>| {
        thread::spawn(move || {
            thread::sleep(HOLD);
            permit.send(()).unwrap();
        })
    };
    let d = contents(0, 1, 10_000);
    let t = [Tensor::new("a", &[10_000], &d).unwrap()];
    let t0 = Instant::now();
    let giver = later(permit.clone());
    let r: wsync::Result<()> = g.pipeline(|p| {
        let _ = p.start(&t, SHORT)?; // handle dropped, never waited
        Err(Error::InvalidState("the producer failed".into()))
    });
    assert!(t0.elapsed() >= HOLD, "pipeline returned before its batch was delivered");
    assert!(matches!(r, Err(Error::InvalidState(_))));
    // (released: sent; its delivery, counted in stats().batches, is what finalize waits for)
    assert!(g.stats().unwrap().batches <= 1);
    giver.join().unwrap();

    let t2 = [Tensor::new("b", &[10_000], &d).unwrap()];
    let t0 = Instant::now();
    let giver = later(permit.clone());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = g.pipeline(|p| {
            std::mem::forget(p.start(&t2, SHORT)?); // even a leaked handle is waited for
            panic!("the producer panicked");
            #[allow(unreachable_code)]
            Ok(())
        });
    }));
    assert!(caught.is_err());
    assert!(t0.elapsed() >= HOLD, "a panicking pipeline did not wait for its batch");
    giver.join().unwrap();
    for _ in 0..8 {
        permit.send(()).unwrap(); // the commit, the close
    }
    g.finalize(1, SHORT).unwrap();
    assert_eq!(g.stats().unwrap().batches, 2); // both delivered by finalize
    drop(g);
    assert_eq!(rx.into_iter().next().unwrap().join().unwrap(), 2);
}

#[test]
fn a_killed_receiver_process_gives_a_named_error() {
    let engine = match std::env::var("WSYNC_SAMPLE_ENGINE") {
        Ok(p) => p,
        Err(_) => {
            eprintln!("skipped: set WSYNC_SAMPLE_ENGINE to build/bin/wsync-sample-engine");
            return;
        }
    };
    let path = std::env::temp_dir().join(format!("wsync-rust-kill-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap().to_string();
    let starter = thread::spawn(move || {
        Group::builder(1)
            .group_name("demo")
            .option("store_addr_file", &p)
            .option("timeout_ms", "5000")
            .option("bucket_bytes", "65536")
            .timeout(Duration::from_secs(20))
            .init()
    });
    let addr = wait_for_file(path.to_str().unwrap());
    let mut child = std::process::Command::new(&engine)
        .args(["--rank", "1", "--store", &addr, "--views", "--scale", "0.1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the sample engine");
    let mut g = starter.join().unwrap().expect("group init");
    let d = vec![7u8; 1 << 20];
    g.send(&[Tensor::new("model.layers.0.first", &[d.len() as i64], &d).unwrap()], SHORT).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = Instant::now();
    let e = (0..3)
        .map(|i| {
            g.send(
                &[Tensor::new(&format!("model.layers.{}.next", i + 1), &[d.len() as i64], &d).unwrap()],
                None, // the group's timeout_ms, 5 s
            )
        })
        .find_map(|r| r.err())
        .or_else(|| g.finalize(1, None).err())
        .expect("sending to a killed receiver succeeded");
    eprintln!("the sender's error: {e}");
    assert!(matches!(e, Error::PeerFailed(_)), "{e}");
    assert!(e.message().contains("receiver rank 1"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
    let _ = std::fs::remove_file(path);
}

/// The timeout rule of wsync.h: NO_WAIT polls (`next` answers Timeout at once and the receiver
/// stays usable), DEFAULT_TIMEOUT is the receiver's timeout_ms option.
#[test]
fn no_wait_polls_and_the_receiver_stays_usable() {
    // The group closes only after the poll (a poll after the close would find the Closed event).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_tx = Arc::new(Mutex::new(done_tx));
    let (g, rx) = group_with(1, &[], move |_, mut r| {
        let t0 = Instant::now();
        let polled = r.next(wsync::NO_WAIT).err();
        let took = t0.elapsed();
        let _ = done_tx.lock().unwrap().send(());
        let later = matches!(r.next(wsync::DEFAULT_TIMEOUT), Ok(Event::Closed));
        (polled, took, later)
    });
    done_rx.recv_timeout(Duration::from_secs(20)).expect("the receiver polled");
    drop(g); // closes the group: the receiver's default wait ends with Closed
    let (polled, took, later) = rx.into_iter().next().unwrap().join().unwrap();
    assert!(matches!(polled, Some(Error::Timeout(_))), "{polled:?}");
    assert!(took < Duration::from_secs(1), "NO_WAIT blocked for {took:?}");
    assert!(later, "after a poll the receiver must still hear the group close");
}
