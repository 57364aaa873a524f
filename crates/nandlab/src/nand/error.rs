//! Typed failures of flash operations.
//!
//! The NAND decides them (a bad block, an uncorrectable read, an OOB longer
//! than declared) and the flash interface passes them to the FTL unchanged,
//! so they live with the NAND. Their numeric values are the C ABI's error
//! codes: stable, never reused.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Typed flash failures. The numeric values are the C ABI error codes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Error, Serialize, Deserialize)]
#[repr(i32)]
pub enum FlashError {
    #[error("address out of range")]
    AddressOutOfRange = 1,
    #[error("bad block")]
    BadBlock = 2,
    #[error("program failed")]
    ProgramFailed = 3,
    #[error("erase failed")]
    EraseFailed = 4,
    #[error("uncorrectable read (ECC failed)")]
    Uncorrectable = 5,
    #[error("power lost")]
    PowerLoss = 6,
    #[error("OOB data longer than the FTL declared it uses")]
    OobTooLong = 7,
    #[error("invalid buffer handle or sector range")]
    InvalidBuffer = 8,
    #[error("device DRAM budget exhausted")]
    DramExhausted = 9,
    #[error("invalid argument")]
    InvalidArgument = 10,
}

impl FlashError {
    pub const ALL: [FlashError; 10] = [
        FlashError::AddressOutOfRange,
        FlashError::BadBlock,
        FlashError::ProgramFailed,
        FlashError::EraseFailed,
        FlashError::Uncorrectable,
        FlashError::PowerLoss,
        FlashError::OobTooLong,
        FlashError::InvalidBuffer,
        FlashError::DramExhausted,
        FlashError::InvalidArgument,
    ];

    /// The C ABI error code (stable; 0 means success and is no error).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The error with C ABI code `code`, if there is one.
    pub fn from_code(code: i32) -> Option<FlashError> {
        FlashError::ALL.into_iter().find(|e| e.code() == code)
    }
}
