//! A panic inside a run as a finding: its message and source location.
//!
//! A Rust panic in FTL code would otherwise end the process (exit 101)
//! with no rule and no reproducer. Each hunt run executes inside
//! [`std::panic::catch_unwind`]; that is sound here because everything the
//! run touched (its session: drive, FTL, oracle) is created inside the
//! closure and dropped with it, so no state a panic left half-updated is
//! ever used again. A process-wide panic hook, installed once, records the
//! message and location of a panic on a thread that is inside [`catch`]
//! (and stays silent there); panics elsewhere go to the previous hook.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

/// A caught panic: what it said and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaughtPanic {
    pub message: String,
    /// `file:line:column` of the panic.
    pub location: String,
}

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<CaughtPanic>> = const { RefCell::new(None) };
}

fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                return previous(info);
            }
            let message = match (info.payload().downcast_ref::<&str>(), info.payload().downcast_ref::<String>()) {
                (Some(s), _) => s.to_string(),
                (_, Some(s)) => s.clone(),
                _ => "(a panic without a message)".to_string(),
            };
            let location = info.location().map_or("unknown".to_string(), |l| l.to_string());
            CAUGHT.with(|c| *c.borrow_mut() = Some(CaughtPanic { message, location }));
        }));
    });
}

/// Run `f`; a panic inside it comes back as its message and location.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, CaughtPanic> {
    install_hook();
    CATCHING.with(|c| c.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(false));
    result.map_err(|_| {
        CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or(CaughtPanic { message: "(panic not recorded)".to_string(), location: "unknown".to_string() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_comes_back_with_its_message_and_location() {
        let caught = catch(|| -> u32 { panic!("map entry {} out of range", 7) }).unwrap_err();
        assert_eq!(caught.message, "map entry 7 out of range");
        assert!(caught.location.contains("panics.rs"), "{}", caught.location);
        assert_eq!(catch(|| 5), Ok(5));
    }
}
