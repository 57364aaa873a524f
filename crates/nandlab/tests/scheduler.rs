//! The transaction schedulers of the timing core v2
//! (`nandlab::timing::event_core`): a read behind a queued program completes
//! first under `mqsim` and `read-priority`, not under `fifo`; suspend
//! shortens a read's latency by exactly what the device's `[timing]` says.
//! Every figure is computed from the shipped `mqsim-default` device file
//! (tR 75 µs, tPROG 750 µs, tBERS 3.8 ms, erase suspend 700 µs, program
//! suspend 100 µs when switched on, 8 KiB pages on a 333 MT/s 8-bit bus).
//!
//! Each property is asserted for every scheduler, the ones that must not
//! have it included: a check that passed whatever the scheduler would prove
//! nothing.

use nandlab::config::Config;
use nandlab::timing::event_core::FlashCore;
use nandlab::timing::scheduler::SchedulerKind;
use nandlab::timing::transaction::{Transaction, TxClass, TxDone, TxId, TxKind};

fn mqsim_default(timing: &[&str]) -> Config {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/mqsim-default.toml");
    let mut c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let assignments: Vec<String> = timing.iter().map(|s| s.to_string()).collect();
    if !assignments.is_empty() {
        c.override_timing(&assignments).unwrap();
    }
    c
}

/// The phases of the device's operations, ns.
struct Phases {
    command: u64,
    page_transfer: u64,
    t_r: u64,
    t_prog: u64,
    t_bers: u64,
}

fn phases(c: &Config) -> Phases {
    let t = c.timing.as_ref().unwrap();
    Phases {
        command: t.command_ns,
        page_transfer: t.channel_ns(u64::from(c.geometry.page_size_bytes())),
        t_r: t.read_ns_by_level[0],
        t_prog: t.program_ns_by_level[0],
        t_bers: t.erase_ns,
    }
}

/// A host transaction on die 0 (channel 0), plane `plane`, page `page`.
fn tx(p: &Phases, kind: TxKind, plane: u32, page: u64, ready_ns: u64) -> Transaction {
    let (channel_in_ns, cell_ns, channel_out_ns) = match kind {
        TxKind::Read => (p.command, p.t_r, p.page_transfer),
        TxKind::Program => (p.command + p.page_transfer, p.t_prog, 0),
        TxKind::Erase => (p.command, p.t_bers, 0),
        TxKind::Copyback => (p.command, p.t_r + p.t_prog, 0),
    };
    Transaction {
        kind,
        class: if kind == TxKind::Erase { TxClass::Gc { urgent: false } } else { TxClass::User },
        die: 0,
        channel: 0,
        planes_mask: 1 << plane,
        page,
        block: page / 256,
        channel_in_ns,
        cell_ns,
        channel_out_ns,
        ready_ns,
        after: None,
        tag: page,
    }
}

fn end_of(done: &[TxDone], id: TxId) -> u64 {
    done.iter().find(|d| d.id == id).unwrap().end_ns
}

/// A program starts on plane 0 of one die; a second program, then a read
/// (of another block) are queued behind it: (read end, second program end).
fn read_behind_a_queued_program(sched: SchedulerKind) -> (u64, u64, Phases) {
    let c = mqsim_default(&[]);
    let p = phases(&c);
    let mut core = FlashCore::for_device(&c.geometry, c.timing.as_ref().unwrap(), sched).with_cache(false, false);
    core.submit(tx(&p, TxKind::Program, 0, 0, 0));
    let mut done = Vec::new();
    core.run_until(0, &mut done);
    let second = core.submit(tx(&p, TxKind::Program, 0, 1, 0));
    let read = core.submit(tx(&p, TxKind::Read, 0, 1000, 0));
    core.run_to_idle(&mut done);
    (end_of(&done, read), end_of(&done, second), p)
}

#[test]
fn a_read_behind_a_queued_program_completes_first_under_mqsim_and_read_priority_not_fifo() {
    for sched in [SchedulerKind::Fifo, SchedulerKind::Mqsim, SchedulerKind::ReadPriority] {
        let (read_end, program_end, p) = read_behind_a_queued_program(sched);
        let first_program_end = p.command + p.page_transfer + p.t_prog;
        let read_ns = p.command + p.t_r + p.page_transfer;
        let program_ns = p.command + p.page_transfer + p.t_prog;
        if sched == SchedulerKind::Fifo {
            // In order on the plane: the read waits for both programs.
            assert_eq!(program_end, first_program_end + program_ns, "{sched:?}");
            assert_eq!(read_end, program_end + read_ns, "{sched:?}");
        } else {
            // The read overtakes the queued program (the running one is not
            // suspended: program suspend is off in mqsim-default).
            assert_eq!(read_end, first_program_end + read_ns, "{sched:?}");
            assert_eq!(program_end, read_end + program_ns, "{sched:?}");
        }
        assert_eq!(read_end < program_end, sched != SchedulerKind::Fifo, "{sched:?}");
    }
}

/// A long operation (`kind`) starts at 0 on plane 0; a read of plane 1
/// arrives at `arrival`: (read latency, the long operation's end, suspends).
fn read_during(sched: SchedulerKind, timing: &[&str], kind: TxKind, arrival: u64) -> (u64, u64, u64, Phases) {
    let c = mqsim_default(timing);
    let p = phases(&c);
    let mut core = FlashCore::for_device(&c.geometry, c.timing.as_ref().unwrap(), sched).with_cache(false, false);
    let long = core.submit(tx(&p, kind, 0, 0, 0));
    let mut done = Vec::new();
    core.run_until(arrival, &mut done);
    let read = core.submit(tx(&p, TxKind::Read, 1, 5000, arrival));
    core.run_to_idle(&mut done);
    (end_of(&done, read) - arrival, end_of(&done, long), core.counters().suspends, p)
}

#[test]
fn program_suspend_shortens_a_read_by_the_program_time_left_minus_the_suspend_latency() {
    let on = ["program_suspend=true"];
    let arrival = 200_000;
    let (waited, program_end, suspends, p) = read_during(SchedulerKind::Mqsim, &on, TxKind::Program, arrival);
    let program_ns = p.command + p.page_transfer + p.t_prog;
    let read_ns = p.command + p.t_r + p.page_transfer;
    assert_eq!(suspends, 0, "mqsim never suspends (as MQSim 7ec40e3)");
    assert_eq!(waited, program_ns - arrival + read_ns, "the read waits for the program");
    assert_eq!(program_end, program_ns);

    let (suspended, later_end, suspends, _) = read_during(SchedulerKind::ReadPriority, &on, TxKind::Program, arrival);
    let suspend_ns = 100_000; // mqsim-default's program_suspend_latency_us
    assert_eq!(suspends, 1);
    assert_eq!(suspended, p.command + suspend_ns + p.t_r + p.page_transfer);
    assert_eq!(waited - suspended, (program_ns - arrival) - suspend_ns, "shorter by tPROG left - suspend latency");
    assert_eq!(later_end, program_ns + suspend_ns + p.t_r, "the program ends later by suspend latency + tR");

    // The device file decides what can be suspended: mqsim-default cannot
    // suspend a program, so read-priority only reorders.
    let (not_suspended, _, suspends, _) = read_during(SchedulerKind::ReadPriority, &[], TxKind::Program, arrival);
    assert_eq!((not_suspended, suspends), (waited, 0));
}

#[test]
fn erase_suspend_shortens_a_read_by_the_erase_time_left_minus_the_suspend_latency() {
    let arrival = 1_000_000;
    let (waited, _, _, p) = read_during(SchedulerKind::Fifo, &[], TxKind::Erase, arrival);
    let erase_ns = p.command + p.t_bers;
    assert_eq!(waited, erase_ns - arrival + p.command + p.t_r + p.page_transfer);
    let (suspended, erase_end, suspends, _) = read_during(SchedulerKind::ReadPriority, &[], TxKind::Erase, arrival);
    let suspend_ns = 700_000; // mqsim-default's erase_suspend_latency_us
    assert_eq!(suspends, 1);
    assert_eq!(waited - suspended, (erase_ns - arrival) - suspend_ns);
    assert_eq!(erase_end, erase_ns + suspend_ns + p.t_r);
    // Too little erase left to be worth a suspension: the read waits.
    let late = erase_ns - suspend_ns / 2;
    let (_, _, suspends, _) = read_during(SchedulerKind::ReadPriority, &[], TxKind::Erase, late);
    assert_eq!(suspends, 0);
}
