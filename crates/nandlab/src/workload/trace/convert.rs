//! Conversion.
