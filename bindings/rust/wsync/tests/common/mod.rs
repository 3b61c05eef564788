//! Helpers shared by the API tests: a group with receivers on threads, deterministic tensors.
#![allow(dead_code)]
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use wsync::{Group, Receiver};

pub const SHORT: Option<Duration> = Some(Duration::from_secs(10));

/// Checksum of bytes (SipHash with fixed keys: the same in every thread of the process).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// Deterministic contents of tensor `i` at `version`.
pub fn contents(i: usize, version: u64, len: usize) -> Vec<f32> {
    (0..len).map(|k| (i * 1_000_003 + k) as f32 * 0.5 + version as f32).collect()
}

/// A group of `n` receivers, each made on its own thread by `make_receiver(rank, store)` and
/// handed to `run(rank, receiver)`; returns the group and the receivers' join handles.
pub fn group_with<R, F>(n: u32, options: &[(&str, &str)], run: F) -> (Group, Vec<thread::JoinHandle<R>>)
where
    R: Send + 'static,
    F: Fn(u32, Receiver) -> R + Send + Sync + Clone + 'static,
{
    let (tx, rx) = mpsc::channel::<String>();
    let opts = options_owned(options);
    let starter = thread::spawn(move || {
        let mut b = Group::builder(n)
            .group_name("rust-tests")
            .store_addr("127.0.0.1:0")
            .timeout(Duration::from_secs(20));
        let path = std::env::temp_dir().join(format!(
            "wsync-rust-{}-{:?}",
            std::process::id(),
            thread::current().id()
        ));
        let _ = std::fs::remove_file(&path); // a stale file of an earlier process
        b = b.option("store_addr_file", path.to_str().unwrap());
        for (k, v) in &opts {
            b = b.option(k, v);
        }
        let _ = tx.send(path.to_string_lossy().into_owned());
        b.init()
    });
    let path = rx.recv().unwrap();
    let addr = wait_for_file(&path);
    let mut handles = Vec::new();
    for rank in 1..=n {
        let (addr, run) = (addr.clone(), run.clone());
        handles.push(thread::spawn(move || {
            let r = Receiver::builder(rank, &addr)
                .group_name("rust-tests")
                .timeout(Duration::from_secs(20))
                .init()
                .expect("receiver init");
            run(rank, r)
        }));
    }
    let group = starter.join().unwrap().expect("group init");
    let _ = std::fs::remove_file(&path);
    (group, handles)
}

fn options_owned(o: &[(&str, &str)]) -> Vec<(String, String)> {
    o.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The "host:port" a group wrote to its store_addr_file.
pub fn wait_for_file(path: &str) -> String {
    for _ in 0..400 {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.trim().is_empty() {
                return s.trim().to_string();
            }
        }
        thread::sleep(Duration::from_millis(25));
    }
    panic!("the group never wrote its store address to {path}");
}
