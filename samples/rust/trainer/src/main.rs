//! wsync sample trainer (Rust): publishes the C trainer's synthetic ~1 GiB model to N engines as
//! weight versions 1..V, in batches of 64 tensors sent asynchronously (two in flight), and prints
//! what it did. Same flags and output as samples/trainer (C):
//!
//!   wsync-sample-trainer-rust --receivers 2 [--store 127.0.0.1:0] [--store-file PATH] [--versions 3]
//!                             [--bucket-mib 256] [--transport ucx] [--tls sm|tcp|...] [--timeout-ms 60000]
//!                             [--scale 1.0]
mod synth;

use std::process::ExitCode;
use std::time::Instant;

use wsync::{Group, Tensor};

struct Args {
    receivers: u32,
    versions: u64,
    store: String,
    store_file: Option<String>,
    transport: String,
    tls: Option<String>,
    bucket_bytes: u64,
    timeout_ms: String,
    scale: f64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        receivers: 2,
        versions: 3,
        store: "127.0.0.1:0".into(),
        store_file: None,
        transport: "ucx".into(),
        tls: None,
        bucket_bytes: 256 << 20,
        timeout_ms: "60000".into(),
        scale: 1.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let (flag, v) = match pair {
            [f, v] => (f.as_str(), v.as_str()),
            [f] => return Err(format!("{f} needs a value")),
            _ => unreachable!(),
        };
        let num = |v: &str| v.parse::<f64>().map_err(|_| format!("{flag}: '{v}' is not a number"));
        match flag {
            "--receivers" => a.receivers = num(v)? as u32,
            "--versions" => a.versions = num(v)? as u64,
            "--store" => a.store = v.into(),
            "--store-file" => a.store_file = Some(v.into()),
            "--transport" => a.transport = v.into(),
            "--tls" => a.tls = Some(v.into()), // UCX transports, announced to the engines too
            "--bucket-mib" => a.bucket_bytes = (num(v)? as u64) << 20,
            "--timeout-ms" => a.timeout_ms = v.into(),
            "--scale" => a.scale = num(v)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

fn run(a: &Args) -> wsync::Result<()> {
    let mut model = synth::model(a.scale);
    let total: usize = model.iter().map(|p| p.nbytes).sum();
    println!(
        "trainer: model of {} tensors, {:.2} GB; waiting for {} engine(s)",
        model.len(),
        total as f64 / 1e9,
        a.receivers
    );
    let mut b = Group::builder(a.receivers)
        .group_name("demo")
        .store_addr(&a.store)
        .transport(&a.transport)
        .adapter("native")
        .option("bucket_bytes", &a.bucket_bytes.to_string())
        .option("timeout_ms", &a.timeout_ms);
    if let Some(f) = &a.store_file {
        b = b.option("store_addr_file", f);
    }
    if let Some(tls) = &a.tls {
        b = b.option("transport.tls", tls);
    }
    let mut group = b.init()?;
    println!("trainer: group 'demo' up, store at {}", group.store_addr());

    for version in 1..=a.versions {
        for p in model.iter_mut() {
            p.fill(version); // "train a step"
        }
        let t0 = Instant::now();
        let tensors = model
            .iter()
            .map(|p| Tensor::with_dtype(&p.name, p.dtype, &p.shape, p.bytes()))
            .collect::<wsync::Result<Vec<_>>>()?;
        // Batches move while the next is started; all are delivered when pipeline returns.
        group.pipeline(|pipe| {
            for batch in tensors.chunks(64) {
                pipe.start(batch, None)?;
            }
            Ok(())
        })?;
        group.finalize(version, None)?;
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "trainer: version {} committed on {} engine(s): {} tensors, {:.2} GB in {:.2} s ({:.2} GB/s per engine)",
            version,
            a.receivers,
            model.len(),
            total as f64 / 1e9,
            dt,
            total as f64 / 1e9 / dt
        );
    }
    let s = group.stats()?;
    println!(
        "trainer: done: {} updates, {} buckets, staging {:.0} MiB",
        s.updates,
        s.buckets,
        s.staging_bytes as f64 / 1048576.0
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("trainer: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trainer: failed: {e}");
            ExitCode::FAILURE
        }
    }
}
