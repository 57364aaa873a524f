//! `nandlab serve`: the NBD server against a hand-written raw client
//! (protocol errors, misbehaving clients) and against real clients
//! (nbdcopy, fio, qemu-io, nbdfuse with ext4 and SQLite), each gated on
//! its tool being installed (see `support::tool`). Every server is started
//! with `--once` or interrupted, and waited for with a bound.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running `nandlab serve`.
struct Server {
    child: Child,
    /// `host:port`.
    addr: String,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<String>>,
}

/// What a server printed and how it ended.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Server {
    /// Start `nandlab serve ARGS --listen 127.0.0.1:0`; wait for its address.
    fn start(args: &[&str]) -> Server {
        Server::start_on(args, &["--listen", "127.0.0.1:0"])
    }

    /// Start `nandlab serve ARGS WHERE`; wait for its address.
    fn start_on(args: &[&str], listen: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nandlab"))
            .arg("serve")
            .args(args)
            .args(listen)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nandlab serve runs");
        let mut stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let err_reader = {
            let stderr = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                    if let Some(url) = line.split("listening on nbd://").nth(1).or(line.split("listening on ").nth(1)) {
                        let _ = tx.send(url.to_string());
                    }
                    stderr.lock().unwrap().push_str(&(line + "\n"));
                }
                String::new()
            })
        };
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("nandlab serve did not print its address: {}", stderr.lock().unwrap());
            }
        };
        Server { child, addr, stderr, readers: vec![out_reader, err_reader] }
    }

    fn url(&self) -> String {
        format!("nbd://{}", self.addr)
    }

    /// SIGINT, as a user's Ctrl-C.
    fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    fn signal(&self, signal: i32) {
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Wait (bounded) until the server's stderr contains `text`.
    fn await_stderr(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.stderr.lock().unwrap().contains(text) {
            assert!(Instant::now() < deadline, "`{text}` never came: {}", self.stderr.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait for the server to exit (killed, and the test failed, after 120 s).
    fn wait(mut self) -> Ended {
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("nandlab serve did not exit: {}", self.stderr.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.readers.remove(0).join().unwrap();
        self.readers.remove(0).join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        Ended { status, stdout, stderr }
    }
}

/// Run a client tool to completion (bounded); its exit status and output.
fn client(program: &str, args: &[&str]) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{program} {} did not end", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Deterministic pseudo-random bytes (xorshift).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

// ----- a raw client -----

const IHAVEOPT: u64 = 0x4948_4156_454f_5054;

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn read_n(s: &mut (impl Read + Write), n: usize) -> Vec<u8> {
    let mut b = vec![0; n];
    s.read_exact(&mut b).expect("the server answers");
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn send_option(s: &mut (impl Read + Write), option: u32, data: &[u8]) {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

/// One option reply: (type, data).
fn option_reply(s: &mut (impl Read + Write)) -> (u32, Vec<u8>) {
    let h = read_n(s, 20);
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), 0x0003_e889_0455_65a9, "reply magic");
    let data = read_n(s, u32_at(&h, 16) as usize);
    (u32_at(&h, 12), data)
}

/// Greeting, flags, LIST, an unknown option, then GO: the export's size.
fn handshake(s: &mut (impl Read + Write)) -> u64 {
    let g = read_n(s, 18);
    assert_eq!(&g[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap();
    send_option(s, 3, b"");
    let (kind, data) = option_reply(s);
    assert_eq!(kind, 2, "NBD_REP_SERVER");
    assert_eq!(&data[4..], b"nandlab");
    assert_eq!(option_reply(s).0, 1, "NBD_REP_ACK");
    send_option(s, 77, b"");
    assert_eq!(option_reply(s).0, (1 << 31) + 1, "NBD_REP_ERR_UNSUP");
    let mut go = 0u32.to_be_bytes().to_vec();
    go.extend_from_slice(&1u16.to_be_bytes());
    go.extend_from_slice(&3u16.to_be_bytes());
    send_option(s, 7, &go);
    let mut size = 0;
    loop {
        let (kind, data) = option_reply(s);
        match kind {
            3 if data[..2] == [0, 0] => size = u64::from_be_bytes(data[2..10].try_into().unwrap()),
            3 => assert_eq!(u32_at(&data, 2), 512, "minimum block size"),
            1 => return size,
            other => panic!("unexpected option reply {other:#x}"),
        }
    }
}

fn request(s: &mut (impl Read + Write), kind: u16, cookie: u64, offset: u64, len: u32, payload: &[u8]) {
    let mut m = 0x2560_9513u32.to_be_bytes().to_vec();
    m.extend_from_slice(&0u16.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(payload);
    s.write_all(&m).unwrap();
}

/// A simple reply: its error, after checking the cookie; `data_len` bytes of data follow on success.
fn reply(s: &mut (impl Read + Write), cookie: u64, data_len: usize) -> (u32, Vec<u8>) {
    let h = read_n(s, 16);
    assert_eq!(u32_at(&h, 0), 0x6744_6698, "simple reply magic");
    assert_eq!(u64::from_be_bytes(h[8..].try_into().unwrap()), cookie);
    let error = u32_at(&h, 4);
    let data = if error == 0 { read_n(s, data_len) } else { Vec::new() };
    (error, data)
}

fn closed_by_server(s: &mut (impl Read + Write)) -> bool {
    let mut b = [0; 64];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn a_raw_client_gets_protocol_errors_and_misbehaving_clients_are_dropped_without_harm() {
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--seed", "5", "--once", "--json", "-"]);
    let mut a = connect(&server.addr);
    let size = handshake(&mut a);
    assert_eq!(size, 57_042_432);
    let data = pattern(8192, 1);
    request(&mut a, 1, 1, 8192, 8192, &data);
    assert_eq!(reply(&mut a, 1, 0).0, 0);
    request(&mut a, 0, 2, 8192, 8192, &[]);
    assert_eq!(reply(&mut a, 2, 8192), (0, data.clone()), "the bytes written read back");
    // Unaligned: 100 bytes inside a sector (read-modify-write in the server).
    request(&mut a, 1, 3, 8292, 100, &[0xAB; 100]);
    assert_eq!(reply(&mut a, 3, 0).0, 0);
    let mut expected = data.clone();
    expected[100..200].fill(0xAB);
    request(&mut a, 0, 4, 8192, 8192, &[]);
    assert_eq!(reply(&mut a, 4, 8192).1, expected);
    // Past the end, too large, unknown: errors, and the connection goes on.
    request(&mut a, 0, 5, size, 512, &[]);
    assert_eq!(reply(&mut a, 5, 0).0, 22, "read past the end: NBD_EINVAL");
    request(&mut a, 1, 6, size - 512, 1024, &[7; 1024]);
    assert_eq!(reply(&mut a, 6, 0).0, 28, "write past the end: NBD_ENOSPC");
    request(&mut a, 0, 7, 0, (1 << 25) + 1, &[]);
    assert_eq!(reply(&mut a, 7, 0).0, 22, "read over the maximum payload: NBD_EINVAL");
    request(&mut a, 42, 8, 0, 0, &[]);
    assert_eq!(reply(&mut a, 8, 0).0, 22, "unknown command: NBD_EINVAL");
    // Trim, then the sectors read as zeros; flush.
    request(&mut a, 4, 9, 8192, 4096, &[]);
    assert_eq!(reply(&mut a, 9, 0).0, 0);
    request(&mut a, 3, 10, 0, 0, &[]);
    assert_eq!(reply(&mut a, 10, 0).0, 0);
    request(&mut a, 0, 11, 8192, 8192, &[]);
    let after_trim = reply(&mut a, 11, 8192).1;
    assert_eq!(&after_trim[..4096], &[0; 4096][..]);
    assert_eq!(&after_trim[4096..], &expected[4096..]);

    // Misbehaving clients, each on its own connection.
    let mut bad_magic = connect(&server.addr);
    handshake(&mut bad_magic);
    bad_magic.write_all(&[0x55; 28]).unwrap();
    assert!(closed_by_server(&mut bad_magic), "a bad request magic ends the connection");
    let mut huge = connect(&server.addr);
    handshake(&mut huge);
    request(&mut huge, 1, 1, 0, 1 << 30, &[]);
    assert!(closed_by_server(&mut huge), "a 1 GiB write payload ends the connection");
    let mut vanishing = connect(&server.addr);
    handshake(&mut vanishing);
    request(&mut vanishing, 1, 1, 0, 4096, &[1; 100]);
    drop(vanishing);
    let mut garbage = connect(&server.addr);
    read_n(&mut garbage, 18);
    garbage.write_all(&[0xFF; 64]).unwrap();
    assert!(closed_by_server(&mut garbage), "unknown client flags end the handshake");

    // The first client lost nothing.
    request(&mut a, 0, 12, 8192, 8192, &[]);
    assert_eq!(reply(&mut a, 12, 8192).1, after_trim);
    request(&mut a, 2, 13, 0, 0, &[]);
    assert!(closed_by_server(&mut a), "NBD_CMD_DISC closes the connection");

    let ended = server.wait();
    assert!(ended.status.success(), "exit {:?}: {}{}", ended.status, ended.stdout, ended.stderr);
    assert_eq!(ended.stderr.matches("dropped").count(), 4, "each misbehaving client logged once: {}", ended.stderr);
    assert!(ended.stderr.contains("vanished in the middle of a request"), "{}", ended.stderr);
    let json_start = ended.stdout.find("{\n").expect("the JSON report");
    let report: serde_json::Value = serde_json::from_str(&ended.stdout[json_start..]).expect("JSON");
    assert_eq!(report["mode"], "serve");
    assert_eq!(report["errors"], 0);
    assert_eq!(report["serve"]["connections"], 5);
    assert_eq!(report["serve"]["connection_errors"], 4);
    assert_eq!(report["serve"]["commands_refused"], 4, "past the end (2), too large, unknown");
}

/// A client that sends requests and never reads a reply blocks only its
/// own connection (the server's send to it waits, and it is no longer
/// read); another client is served meanwhile, in both serving modes.
#[test]
fn a_client_that_never_reads_its_replies_does_not_stop_the_others() {
    for timed in [false, true] {
        let mut args = vec!["--preset", "tiny-timed", "--ftl", "page", "--seed", "6", "--once"];
        if timed {
            args.push("--timed");
        }
        let server = Server::start(&args);
        let mut stuck = connect(&server.addr);
        handshake(&mut stuck);
        // 64 reads of 1 MiB: far more than the socket buffers hold.
        for cookie in 0..64 {
            request(&mut stuck, 0, cookie, 0, 1 << 20, &[]);
        }
        let mut other = connect(&server.addr);
        other.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        handshake(&mut other);
        let data = pattern(4096, 3);
        request(&mut other, 1, 1, 1 << 20, 4096, &data);
        assert_eq!(reply(&mut other, 1, 0).0, 0, "timed {timed}: the other client's write is answered");
        request(&mut other, 0, 2, 1 << 20, 4096, &[]);
        assert_eq!(reply(&mut other, 2, 4096), (0, data), "timed {timed}: and its read");
        drop(stuck);
        request(&mut other, 2, 3, 0, 0, &[]);
        assert!(closed_by_server(&mut other));
        let ended = server.wait();
        assert!(ended.status.success(), "timed {timed}: exit {:?}: {}{}", ended.status, ended.stdout, ended.stderr);
    }
}

#[test]
fn bad_options_exit_2_before_listening() {
    let run = |args: &[&str]| {
        support::nandlab_within(&[&["serve", "--preset", "tiny"][..], args].concat(), Duration::from_secs(60))
    };
    for (args, says) in [
        (&["--listen", "8.8.8.8:10809"][..], "--allow-remote"),
        (&["--listen", "nowhere"][..], "--listen nowhere"),
        (&["--on-violation", "panic"][..], "continue, eio or stop"),
        (&["--block-min", "3"][..], "--block-min 3"),
        (&["--stats-interval", "0"][..], "seconds"),
        (&["--ftl", "nosuch"][..], "nosuch"),
        (&["--timed"][..], "--timed: device `tiny` has no [timing] table"),
        (&["--power-cut-on-exit"][..], "--drive <FILE>"),
        (&["--drive", "d.nld", "--power-cut-on-exit", "--remount"][..], "cannot be used with"),
        (&["--drive", "/nonexistent/dir/d.nld"][..], "/nonexistent/dir is not a directory"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("listening on"), "{args:?} listened: {stderr}");
    }
}

#[test]
fn nbdcopy_round_trips_a_file_byte_for_byte_and_the_remount_verifies_it() {
    if !support::tool("nbdcopy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    let data = pattern(32 << 20, 3);
    std::fs::write(&input, &data).unwrap();
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--seed", "1", "--remount"]);
    let (ok, text) = client("nbdcopy", &[input.to_str().unwrap(), &server.url()]);
    assert!(ok, "nbdcopy in: {text}");
    let (ok, text) = client("nbdcopy", &[&server.url(), output.to_str().unwrap()]);
    assert!(ok, "nbdcopy out: {text}");
    server.interrupt();
    let ended = server.wait();
    let back = std::fs::read(&output).unwrap();
    assert_eq!(back.len(), 57_042_432);
    assert!(back[..data.len()] == data[..], "the bytes read back differ from those written");
    assert!(back[data.len()..].iter().all(|&b| b == 0), "never-written sectors read as zeros");
    assert_eq!(ended.status.code(), Some(130), "interrupted, no violation: {}{}", ended.stdout, ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
    assert!(ended.stdout.contains("111411 sectors verified"), "{}", ended.stdout);
}

/// The export's size, from the server's first line (`..., N bytes, export ...`).
fn export_bytes(stderr: &str) -> usize {
    let before = stderr.split(" bytes, export").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// `--timed` on a timed preset: nbdcopy fills the whole export and reads
/// it back byte for byte; the report's simulated read latency is at least
/// the preset's page read time (every sector is written, so every read
/// goes to flash). Untimed, the report has no timing. No assertion on real
/// time.
#[test]
fn timed_serving_keeps_the_bytes_and_reports_simulated_latencies_of_at_least_a_page_read() {
    if !support::tool("nbdcopy") {
        return;
    }
    let config = nandlab::config::Config::preset("tiny-timed").unwrap();
    let t_r_ns = config.require_timing().unwrap().read_ns_by_level.iter().copied().min().unwrap();
    assert!(t_r_ns > 0);
    let dir = tempfile::tempdir().unwrap();
    let (input, output, json) = (dir.path().join("in.bin"), dir.path().join("out.bin"), dir.path().join("r.json"));
    for timed in [true, false] {
        let mut args = vec!["--preset", "tiny-timed", "--ftl", "page", "--seed", "4", "--json", json.to_str().unwrap()];
        if timed {
            args.push("--timed");
        }
        let server = Server::start(&args);
        let size = export_bytes(&server.stderr.lock().unwrap());
        let data = pattern(size, 5);
        std::fs::write(&input, &data).unwrap();
        let (ok, text) = client("nbdcopy", &[input.to_str().unwrap(), &server.url()]);
        assert!(ok, "nbdcopy in: {text}");
        let (ok, text) = client("nbdcopy", &[&server.url(), output.to_str().unwrap()]);
        assert!(ok, "nbdcopy out: {text}");
        server.interrupt();
        let ended = server.wait();
        assert!(std::fs::read(&output).unwrap() == data, "timed {timed}: the bytes read back differ");
        assert_eq!(ended.status.code(), Some(130), "{}{}", ended.stdout, ended.stderr);
        assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        if !timed {
            assert!(report.get("timed").is_none(), "untimed: no timing section");
            assert!(!ended.stdout.contains("latency "), "{}", ended.stdout);
            continue;
        }
        assert!(ended.stderr.contains("timed (replies paced"), "{}", ended.stderr);
        let t = &report["timed"];
        let read = &t["read"];
        assert!(read["count"].as_u64().unwrap() > 0, "{t}");
        assert!(t["write"]["count"].as_u64().unwrap() > 0, "{t}");
        let mean_ns = read["mean_us"].as_f64().unwrap() * 1000.0;
        assert!(mean_ns >= t_r_ns as f64, "read mean {mean_ns} ns below tR {t_r_ns} ns: {t}");
        assert!(read["p50_us"].as_f64().unwrap() * 1000.0 >= t_r_ns as f64 * 0.999, "{t}");
        assert!(read["p99_us"].as_f64().unwrap() >= read["p50_us"].as_f64().unwrap(), "{t}");
        let replies = t["replies"].as_u64().unwrap();
        assert!(replies >= read["count"].as_u64().unwrap() + t["write"]["count"].as_u64().unwrap(), "{t}");
        assert!(t["late_replies"].as_u64().unwrap() <= replies, "{t}");
        assert!(t["simulated_seconds"].as_f64().unwrap() > 0.0, "{t}");
        assert!(ended.stdout.contains("  latency    read"), "{}", ended.stdout);
        assert!(ended.stdout.contains("  timed      "), "{}", ended.stdout);
    }
}

/// fio's `nbd` engine, random writes over twice the drive with crc32c
/// verification: the output and whether fio succeeded.
fn fio_verify(url: &str) -> (bool, String) {
    client(
        "fio",
        &[
            "--name=serve",
            "--ioengine=nbd",
            &format!("--uri={url}"),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=16",
            "--size=54M",
            "--io_size=108M",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--randseed=7",
            // No verify state file in the working directory.
            "--verify_state_save=0",
        ],
    )
}

#[test]
fn fio_verifies_every_block_on_the_page_ftl() {
    if !support::tool("fio") {
        return;
    }
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--seed", "2", "--once"]);
    let (ok, text) = fio_verify(&server.url());
    let ended = server.wait();
    assert!(ok && !text.contains("verify:"), "fio: {text}");
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
}

/// Peak resident set of process `pid` (`VmHWM`), bytes.
fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
}

/// The memory bound: the server's peak RSS is at most the data
/// written + the drive's usual `stress` footprint + 64 MiB. The footprint
/// is `stress`'s own peak RSS (its report's `peak_rss_bytes`) on the same
/// preset, FTL and seed writing the same bytes sequentially: the drive,
/// FTL, flash and oracle state that much data costs, without the bytes
/// themselves. fio writes 128 MiB (1 MiB requests), reads them back and
/// verifies them, then the server's `VmHWM` is read. The same run with
/// the hidden `--byte-store-mutant keeps-second-copies` (every write's
/// bytes kept twice) must exceed the bound: the test can fail.
#[test]
fn serve_peak_rss_is_at_most_the_data_written_plus_the_stress_footprint_plus_64_mib() {
    if !support::tool("fio") {
        return;
    }
    const WRITTEN_BYTES: u64 = 128 << 20;
    const SLACK_BYTES: u64 = 64 << 20;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stress.json");
    let drive = ["--preset", "femu-bbssd", "--ftl", "page", "--seed", "1"];
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .arg("stress")
        .args(drive)
        .args(["--rw", "write", "--bs", "1m", "--write_size", "128m", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["host"]["write_bytes"].as_u64(), Some(WRITTEN_BYTES), "stress wrote the same bytes");
    let footprint = report["peak_rss_bytes"].as_u64().unwrap();
    assert!(footprint > 1 << 20, "{footprint}");
    let bound = WRITTEN_BYTES + footprint + SLACK_BYTES;
    for mutant in [None, Some("keeps-second-copies")] {
        let mut args = drive.to_vec();
        if let Some(m) = mutant {
            args.extend(["--byte-store-mutant", m]);
        }
        let server = Server::start(&args);
        let idle = peak_rss_bytes(server.child.id());
        let (ok, text) = client(
            "fio",
            &[
                "--name=rss",
                "--ioengine=nbd",
                &format!("--uri={}", server.url()),
                "--rw=write",
                "--bs=1m",
                "--iodepth=8",
                "--size=128m",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_fatal=1",
                "--verify_state_save=0",
            ],
        );
        let peak = peak_rss_bytes(server.child.id());
        server.interrupt();
        let ended = server.wait();
        assert!(ok && !text.contains("verify:"), "fio: {text}");
        assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
        assert!(ended.stdout.contains("128.0 MiB live"), "{}", ended.stdout);
        let mib = |b: u64| b >> 20;
        eprintln!(
            "mutant {mutant:?}: peak RSS {} MiB (idle {} MiB); bound {} MiB = {} written + {} stress footprint + {}",
            mib(peak),
            mib(idle),
            mib(bound),
            mib(WRITTEN_BYTES),
            mib(footprint),
            mib(SLACK_BYTES)
        );
        match mutant {
            None => assert!(peak <= bound, "peak RSS {} MiB over the bound {} MiB", mib(peak), mib(bound)),
            Some(_) => assert!(peak > bound, "the mutant's {} MiB must break the bound {} MiB", mib(peak), mib(bound)),
        }
    }
}

#[test]
fn with_a_broken_ftl_fio_reads_wrong_bytes_and_nandlab_reports_the_violation() {
    if !support::tool("fio") {
        return;
    }
    let server = Server::start(&[
        "--preset",
        "tiny",
        "--ftl",
        "buggy",
        "--ftl-opt",
        "bug=alias-two-lbas",
        "--seed",
        "2",
        "--once",
    ]);
    let (ok, text) = fio_verify(&server.url());
    let ended = server.wait();
    assert!(!ok && text.contains("verify: bad header"), "fio must see the misdirected bytes: {text}");
    assert_eq!(ended.status.code(), Some(1), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stderr.contains("violation (connection"), "logged when it happens: {}", ended.stderr);
    assert!(ended.stdout.contains("misdirected_read"), "{}", ended.stdout);
}

#[test]
fn qemu_io_writes_and_reads_back_patterns_aligned_or_not() {
    if !support::tool("qemu-io") {
        return;
    }
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--seed", "3", "--once"]);
    let (ok, text) = client(
        "qemu-io",
        &[
            "-f",
            "raw",
            &server.url(),
            "-c",
            "write -P 0xa5 0 1M",
            "-c",
            "write -P 0x3c 4096 8192",
            "-c",
            "read -P 0xa5 0 4096",
            "-c",
            "read -P 0x3c 4096 8192",
            "-c",
            "read -P 0xa5 12288 1036288",
            "-c",
            "write -z 65536 65536",
            "-c",
            "read -P 0 65536 65536",
            "-c",
            "flush",
        ],
    );
    let ended = server.wait();
    assert!(ok && !text.contains("Pattern verification failed"), "qemu-io: {text}");
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
}

/// Whether FUSE mounts work here (a container may lack /dev/fuse).
fn fuse_usable() -> bool {
    if !Path::new("/dev/fuse").exists() {
        if std::env::var("NANDLAB_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("/dev/fuse is missing and NANDLAB_REQUIRE_TOOLS=1");
        }
        eprintln!("SKIPPED: /dev/fuse is missing: no FUSE mounts here");
        return false;
    }
    true
}

/// Unmount a FUSE mount point (bounded).
fn unmount(dir: &Path) {
    let _ = client("fusermount3", &["-u", dir.to_str().unwrap()]);
}

#[test]
fn ext4_and_sqlite_on_the_drive_through_nbdfuse_stay_consistent() {
    for t in ["nbdfuse", "mkfs.ext4", "e2fsck", "fuse2fs", "fusermount3", "sqlite3"] {
        if !support::tool(t) {
            return;
        }
    }
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mnt, fs, tree) = (dir.path().join("mnt"), dir.path().join("fs"), dir.path().join("tree"));
    for d in [&mnt, &fs, &tree.join("a/b")] {
        std::fs::create_dir_all(d).unwrap();
    }
    for (i, name) in ["a/one", "a/b/two", "three"].iter().enumerate() {
        std::fs::write(tree.join(name), pattern(100_000 + i * 7777, i as u64 + 1)).unwrap();
    }
    // Byte-granular superblock updates of fuse2fs pass with --block-min 1.
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--seed", "4", "--block-min", "1", "--remount"]);
    let disk = mnt.join("disk");
    let mut nbdfuse = Command::new("nbdfuse").arg(&disk).arg(server.url()).spawn().expect("nbdfuse runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !disk.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let disk_s = disk.to_str().unwrap();
    let steps = || -> Result<(), String> {
        let run = |p: &str, a: &[&str]| match client(p, a) {
            (true, _) => Ok(()),
            (false, text) => Err(format!("{p} {}: {text}", a.join(" "))),
        };
        run("mkfs.ext4", &["-q", "-F", "-d", tree.to_str().unwrap(), disk_s])?;
        run("e2fsck", &["-f", "-n", disk_s])?;
        run("fuse2fs", &[disk_s, fs.to_str().unwrap(), "-o", "fakeroot"])?;
        let db = fs.join("test.db");
        let mut sql = String::from("PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);\n");
        for i in 0..2000 {
            sql.push_str(&format!("INSERT INTO t(v) VALUES(randomblob({}));\n", 100 + i % 900));
        }
        sql.push_str("DELETE FROM t WHERE k % 3 = 0; PRAGMA wal_checkpoint(FULL);\n");
        std::fs::write(dir.path().join("load.sql"), sql).unwrap();
        run("sh", &["-c", &format!("sqlite3 {} < {}", db.display(), dir.path().join("load.sql").display())])?;
        let (ok, text) = client("sqlite3", &[db.to_str().unwrap(), "PRAGMA integrity_check; SELECT count(*) FROM t;"]);
        if !ok || !text.starts_with("ok\n1334") {
            return Err(format!("sqlite: {text}"));
        }
        for name in ["a/one", "a/b/two", "three"] {
            if std::fs::read(fs.join(name)).ok() != std::fs::read(tree.join(name)).ok() {
                return Err(format!("{name} differs after the round trip"));
            }
        }
        unmount(&fs);
        run("e2fsck", &["-f", "-n", disk_s])
    };
    let result = steps();
    unmount(&fs);
    unmount(&mnt);
    let _ = nbdfuse.wait();
    server.interrupt();
    let ended = server.wait();
    result.unwrap();
    assert!(ended.stdout.contains("PASS — no violations"), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stdout.contains("sectors verified"), "{}", ended.stdout);
}

#[test]
fn over_a_unix_socket_sigusr1_prints_live_counters_and_on_violation_stop_ends_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nbd.sock");
    let server = Server::start_on(
        &[
            "--preset",
            "tiny",
            "--ftl",
            "buggy",
            "--ftl-opt",
            "bug=alias-two-lbas",
            "--seed",
            "6",
            "--on-violation",
            "stop",
        ],
        &["--unix", socket.to_str().unwrap()],
    );
    let mut s = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    handshake(&mut s);
    let blocks: Vec<Vec<u8>> = (0..512).map(|i| pattern(4096, i + 100)).collect();
    for (i, b) in blocks.iter().enumerate() {
        request(&mut s, 1, i as u64, i as u64 * 4096, 4096, b);
        assert_eq!(reply(&mut s, i as u64, 0).0, 0);
    }
    server.signal(libc::SIGUSR1);
    server.await_stderr("stats: 1 open connection(s), 512 commands");
    // Read back until the violation: EIO, then the server closes.
    let mut eio = false;
    for i in 0..512u64 {
        request(&mut s, 0, 1000 + i, i * 4096, 4096, &[]);
        match reply(&mut s, 1000 + i, 4096) {
            (0, data) => assert_eq!(data, blocks[i as usize], "right bytes or EIO, never wrong bytes with eio/stop"),
            (5, _) => {
                eio = true;
                break;
            }
            (e, _) => panic!("error {e}"),
        }
    }
    assert!(eio, "the aliasing bug must show");
    let ended = server.wait();
    assert_eq!(ended.status.code(), Some(1), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stdout.contains("stopped: a violation (--on-violation stop)"), "{}", ended.stdout);
    assert!(!socket.exists(), "the socket file is removed at exit");
}

#[test]
fn connections_beyond_64_are_closed_at_once_and_the_others_are_served() {
    let server = Server::start(&["--preset", "tiny", "--seed", "8", "--once"]);
    // Each connection completes its handshake before the next opens, so
    // none is waiting in the handshake, whose timeout (30 s) a slow run on
    // a loaded machine could reach before the 65th connection comes.
    let mut open: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = connect(&server.addr);
            handshake(&mut s);
            s
        })
        .collect();
    let mut extra = connect(&server.addr);
    assert!(closed_by_server(&mut extra), "the 65th connection is closed");
    for (i, s) in open.iter_mut().enumerate() {
        request(s, 3, i as u64, 0, 0, &[]);
        assert_eq!(reply(s, i as u64, 0).0, 0, "open connection {i} is still served");
    }
    for s in &mut open {
        request(s, 2, 99, 0, 0, &[]);
    }
    drop(open);
    let ended = server.wait();
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stderr.contains("refused: 64 connections are open already"), "{}", ended.stderr);
}

// ----- --drive FILE: the drive outlives the process -----

/// Connect, handshake, run `f` on the connection, disconnect; wait for the
/// `--once` server to exit.
fn with_raw_client(server: Server, f: impl FnOnce(&mut TcpStream)) -> Ended {
    let mut s = connect(&server.addr);
    handshake(&mut s);
    f(&mut s);
    request(&mut s, 2, 99, 0, 0, &[]);
    server.wait()
}

fn raw_write(s: &mut TcpStream, cookie: u64, offset: u64, data: &[u8]) {
    request(s, 1, cookie, offset, data.len() as u32, data);
    assert_eq!(reply(s, cookie, 0).0, 0, "write at {offset}");
}

fn raw_read(s: &mut TcpStream, cookie: u64, offset: u64, len: usize) -> Vec<u8> {
    request(s, 0, cookie, offset, len as u32, &[]);
    let (error, data) = reply(s, cookie, len);
    assert_eq!(error, 0, "read at {offset}");
    data
}

fn raw_flush(s: &mut TcpStream, cookie: u64) {
    request(s, 3, cookie, 0, 0, &[]);
    assert_eq!(reply(s, cookie, 0).0, 0, "flush");
}

/// `--timed` on a drive file: the timing model's copy of the drive mounts
/// the same flash, so data written in an earlier run is read from flash —
/// its reads take at least a page read (tR). Had the timed copy started
/// formatted, the data would be unwritten to it and its reads would skip
/// the flash (no tR): the run with `--timed` but without the drive file's
/// data shows that.
#[test]
fn a_timed_restart_on_a_drive_file_reads_the_earlier_data_from_flash() {
    let config = nandlab::config::Config::preset("tiny-timed").unwrap();
    let t_r_ns = config.require_timing().unwrap().read_ns_by_level.iter().copied().min().unwrap() as f64;
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("drive.nld"), dir.path().join("r.json"));
    let (f, j) = (file.to_str().unwrap(), json.to_str().unwrap());
    let data = pattern(64 << 10, 31);
    let mean_read_ns = |fresh: bool| {
        let drive = if fresh { dir.path().join("fresh.nld") } else { file.clone() };
        let args = ["--preset", "tiny-timed", "--ftl", "page", "--once", "--timed", "--json", j];
        let server = Server::start(&[&args[..], &["--drive", drive.to_str().unwrap()]].concat());
        let ended = with_raw_client(server, |s| {
            let expected = if fresh { vec![0; data.len()] } else { data.clone() };
            assert!(raw_read(s, 1, 1 << 20, data.len()) == expected, "fresh {fresh}: the bytes read back");
        });
        assert!(ended.status.success(), "exit {:?}: {}{}", ended.status, ended.stdout, ended.stderr);
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let read = &report["timed"]["read"];
        assert_eq!(read["count"], 1, "{report}");
        read["mean_us"].as_f64().unwrap() * 1000.0
    };
    let server = Server::start(&["--preset", "tiny-timed", "--ftl", "page", "--once", "--seed", "8", "--drive", f]);
    let ended = with_raw_client(server, |s| raw_write(s, 1, 1 << 20, &data));
    assert!(ended.status.success(), "exit {:?}: {}{}", ended.status, ended.stdout, ended.stderr);
    let kept = mean_read_ns(false);
    assert!(kept >= t_r_ns, "a read of kept data: {kept} ns, below tR {t_r_ns} ns");
    let fresh = mean_read_ns(true);
    assert!(fresh < t_r_ns, "a read of never-written data skips the flash: {fresh} ns");
}

/// A power cut at exit, a recovery checked sector by sector, then a clean
/// restart: what was flushed before the cut reads back byte for byte, what
/// was written after it reads as the old or the new bytes, and what was
/// written on the recovered drive survives the clean restart. A raw
/// client: no flush is sent that the test does not send.
#[test]
fn a_drive_file_keeps_the_bytes_across_a_power_cut_and_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drive.nld");
    let f = file.to_str().unwrap();
    let base = ["--preset", "tiny", "--ftl", "optr", "--drive", f, "--once"];
    let (flushed, later, after) = (pattern(256 << 10, 21), pattern(64 << 10, 22), pattern(128 << 10, 23));

    let server = Server::start(&[&base[..], &["--seed", "4", "--power-cut-on-exit"]].concat());
    let ended = with_raw_client(server, |s| {
        raw_write(s, 1, 0, &flushed);
        raw_flush(s, 2);
        raw_write(s, 3, 0, &later);
    });
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stderr.contains("drive.nld: new, formatted"), "{}", ended.stderr);
    assert!(ended.stderr.contains("(as a power cut left it)"), "{}", ended.stderr);

    let server = Server::start(&base);
    let ended = with_raw_client(server, |s| {
        let back = raw_read(s, 1, 0, flushed.len());
        assert!(back[later.len()..] == flushed[later.len()..], "bytes flushed before the power cut were lost");
        let head = &back[..later.len()];
        assert!(head == &flushed[..later.len()] || head == &later[..], "the unflushed write is neither old nor new");
        raw_write(s, 2, 1 << 20, &after);
        raw_flush(s, 3);
    });
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(
        ended.stderr.contains("recovered after a power cut; every sector read back and checked"),
        "{}",
        ended.stderr
    );
    assert!(
        ended
            .stderr
            .contains("(guarantee optr, 1 write(s) and trim(s) not yet durable at the cut): 0 error violation(s)"),
        "{}",
        ended.stderr
    );
    assert!(ended.stderr.contains("seed 4,"), "the file's seed is kept: {}", ended.stderr);

    let server = Server::start(&base);
    let ended = with_raw_client(server, |s| {
        assert!(raw_read(s, 1, 1 << 20, after.len()) == after, "the bytes written after the recovery");
        assert!(raw_read(s, 2, 256 << 10, 4096) == vec![0; 4096], "never written: zeros");
    });
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    assert!(ended.stderr.contains("drive.nld: mounted after a clean shutdown"), "{}", ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
}

/// A drive file damaged in the middle, truncated, of another format
/// version, or made for another device is refused with exit 2 and a
/// message naming what is wrong, before the server listens; the intact
/// file is served.
#[test]
fn a_damaged_or_foreign_drive_file_exits_2_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drive.nld");
    let f = file.to_str().unwrap();
    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--drive", f, "--once", "--seed", "2"]);
    let ended = with_raw_client(server, |s| {
        for i in 0..48 {
            raw_write(s, i, i * (64 << 10), &pattern(64 << 10, i + 100));
        }
    });
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
    let good = std::fs::read(&file).unwrap();
    assert!(good.len() > 3 << 20 && good.len() < 4 << 20, "about the data written: {} bytes", good.len());

    let serve = |name: &str, bytes: &[u8], extra: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let device: &[&str] = if extra.is_empty() { &["--preset", "tiny", "--ftl", "page"] } else { extra };
        let args =
            [&["serve", "--listen", "127.0.0.1:0", "--once", "--drive", path.to_str().unwrap()][..], device].concat();
        let out = support::nandlab_within(&args, Duration::from_secs(60));
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let mut corrupt = good.clone();
    corrupt[good.len() / 2] ^= 0x01;
    let (code, err) = serve("corrupt.nld", &corrupt, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("corrupt.nld: ") && err.contains("(file offset ") && err.contains("CRC-32 expected"), "{err}");
    let (code, err) = serve("short.nld", &good[..good.len() - 4096], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("short.nld: truncated: "), "{err}");
    let mut newer = good.clone();
    newer[16] = 9;
    let (code, err) = serve("newer.nld", &newer, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("format version 9 (header bytes 16..20); this nandlab reads version 1"), "{err}");
    let (code, err) = serve("other-ftl.nld", &good, &["--preset", "tiny", "--ftl", "dftl"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("made for another device: ") && err.contains("ftl is page in the file, dftl here"), "{err}");
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/tiny.toml");
    let smaller = std::fs::read_to_string(preset).unwrap().replace("blocks_per_plane = 64", "blocks_per_plane = 48");
    let config = dir.path().join("smaller.toml");
    std::fs::write(&config, smaller).unwrap();
    let (code, err) = serve("other-geometry.nld", &good, &["--config", config.to_str().unwrap(), "--ftl", "page"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("geometry.blocks_per_plane is 64 in the file, 48 here"), "{err}");
    assert!(!err.contains("listening on"), "refused before listening: {err}");

    let server = Server::start(&["--preset", "tiny", "--ftl", "page", "--drive", f, "--once"]);
    let ended = with_raw_client(server, |s| {
        assert!(raw_read(s, 1, 47 * (64 << 10), 64 << 10) == pattern(64 << 10, 147));
    });
    assert!(ended.status.success(), "{}{}", ended.stdout, ended.stderr);
}

/// qemu-io writes, the server stops cleanly, a new one mounts the same
/// file: qemu-io reads the patterns back.
#[test]
fn qemu_io_reads_back_after_a_clean_restart_on_the_drive_file() {
    if !support::tool("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drive.nld");
    let args = ["--preset", "tiny", "--ftl", "dftl", "--drive", file.to_str().unwrap(), "--once"];
    let server = Server::start(&args);
    let writes = ["write -P 0x5a 0 2M", "write -P 0xc3 8M 12288", "write -z 65536 4096"];
    let (ok, text) =
        client("qemu-io", &[&["-f", "raw", &server.url()][..], &writes.map(|w| ["-c", w]).concat()].concat());
    let ended = server.wait();
    assert!(ok && ended.status.success(), "{text}{}{}", ended.stdout, ended.stderr);
    let server = Server::start(&args);
    let reads = ["read -P 0x5a 0 65536", "read -P 0 65536 4096", "read -P 0x5a 69632 2027520", "read -P 0xc3 8M 12288"];
    let (ok, text) =
        client("qemu-io", &[&["-f", "raw", &server.url()][..], &reads.map(|r| ["-c", r]).concat()].concat());
    let ended = server.wait();
    assert!(ok && !text.contains("Pattern verification failed"), "qemu-io: {text}");
    assert!(ended.stderr.contains("mounted after a clean shutdown"), "{}", ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}", ended.stdout);
}

/// ext4 survives a power cut: mkfs.ext4 (which syncs) on a drive served
/// with `--power-cut-on-exit`, the server stopped, a new server recovers
/// the drive file; `e2fsck -f -n` finds the file system clean and its
/// files are the ones copied in.
#[test]
fn ext4_made_before_a_power_cut_is_clean_after_the_recovery() {
    for t in ["nbdfuse", "mkfs.ext4", "e2fsck", "debugfs", "fusermount3"] {
        if !support::tool(t) {
            return;
        }
    }
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mnt, tree) = (dir.path().join("mnt"), dir.path().join("tree"));
    for d in [&mnt, &tree.join("a")] {
        std::fs::create_dir_all(d).unwrap();
    }
    for (i, name) in ["a/one", "two"].iter().enumerate() {
        std::fs::write(tree.join(name), pattern(200_000 + i * 999, i as u64 + 7)).unwrap();
    }
    let file = dir.path().join("drive.nld");
    let base = ["--preset", "tiny", "--ftl", "page", "--block-min", "1", "--drive", file.to_str().unwrap()];
    let disk = mnt.join("disk");
    let disk_s = disk.to_str().unwrap().to_string();
    // One server's life: nbdfuse exposes it as `disk` while `steps` run.
    let session = |args: &[&str], steps: &dyn Fn() -> Result<(), String>| -> (Result<(), String>, Ended) {
        let server = Server::start(args);
        let mut nbdfuse = Command::new("nbdfuse").arg(&disk).arg(server.url()).spawn().expect("nbdfuse runs");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !disk.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let result = steps();
        unmount(&mnt);
        let _ = nbdfuse.wait();
        server.interrupt();
        (result, server.wait())
    };
    let run = |p: &str, a: &[&str]| match client(p, a) {
        (true, text) => Ok(text),
        (false, text) => Err(format!("{p} {}: {text}", a.join(" "))),
    };
    let (made, ended) = session(&[&base[..], &["--seed", "3", "--power-cut-on-exit"]].concat(), &|| {
        run("mkfs.ext4", &["-q", "-F", "-d", tree.to_str().unwrap(), &disk_s]).map(drop)
    });
    made.unwrap();
    assert!(ended.stderr.contains("(as a power cut left it)"), "{}", ended.stderr);
    let (checked, ended) = session(&base, &|| {
        run("e2fsck", &["-f", "-n", &disk_s])?;
        for name in ["a/one", "two"] {
            let out = dir.path().join("out");
            run("debugfs", &["-R", &format!("dump /{name} {}", out.display()), &disk_s])?;
            if std::fs::read(&out).ok() != std::fs::read(tree.join(name)).ok() {
                return Err(format!("{name} differs after the power cut"));
            }
        }
        Ok(())
    });
    checked.unwrap();
    assert!(ended.stderr.contains("recovered after a power cut"), "{}", ended.stderr);
    assert!(ended.stderr.contains(": 0 error violation(s)"), "{}", ended.stderr);
    assert!(ended.stdout.contains("PASS — no violations"), "{}{}", ended.stdout, ended.stderr);
}

/// Two servers on one drive file would each save over the other (the last
/// to exit winning): while one serves it, a second `serve --drive` of the
/// same file exits 2 naming it, before listening; once the first has
/// ended, the file opens again.
#[test]
fn a_drive_file_in_use_by_a_running_server_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drive.nld");
    let f = file.to_str().unwrap();
    let first = Server::start(&["--preset", "tiny", "--ftl", "page", "--drive", f, "--seed", "3"]);
    // Were it not refused, it would serve (bounded here: killed, and the
    // test failed, after 60 s).
    let mut second = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(["serve", "--preset", "tiny", "--ftl", "page", "--drive", f, "--listen", "127.0.0.1:0", "--once"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second server on the same drive file was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    second.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("in use by another nandlab serve") && err.contains("drive.nld.lock"), "{err}");
    assert!(!err.contains("listening on"), "refused before listening: {err}");
    first.interrupt();
    let ended = first.wait();
    assert_eq!(ended.status.code(), Some(130), "{}", ended.stderr);
    assert!(ended.stderr.contains("drive saved to"), "{}", ended.stderr);
    // The lock went with the first server: the drive opens again.
    let again = Server::start(&["--preset", "tiny", "--ftl", "page", "--drive", f]);
    again.interrupt();
    let ended = again.wait();
    assert_eq!(ended.status.code(), Some(130), "{}", ended.stderr);
    assert!(ended.stderr.contains("mounted after a clean shutdown"), "{}", ended.stderr);
}
