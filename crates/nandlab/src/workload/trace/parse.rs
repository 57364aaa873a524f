//! Byte-level field splitting and number parsing shared by the readers.
//!
//! Readers parse `&[u8]` lines in place: no `String`, no allocation, no
//! UTF-8 validation on the hot path. Every parser returns `None` on any
//! malformed input (empty, a stray character, overflow) and the reader turns
//! that into an error naming the field.

/// What a field failed to be: the field's name and what was expected.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// The field, as the format's documentation names it (`Offset`, `lba`, …).
    pub field: &'static str,
    /// What the field should have held.
    pub expected: &'static str,
    /// The offending bytes: a range of the line (the whole line if unknown).
    pub found: (usize, usize),
}

impl LineError {
    /// An error about the sub-slice `part` of `line`.
    pub fn at(line: &[u8], part: &[u8], field: &'static str, expected: &'static str) -> Self {
        let start = (part.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
        let found = if start <= line.len() && start + part.len() <= line.len() {
            (start, start + part.len())
        } else {
            (0, line.len())
        };
        LineError { field, expected, found }
    }

    /// An error about the whole line.
    pub fn line(line: &[u8], field: &'static str, expected: &'static str) -> Self {
        LineError { field, expected, found: (0, line.len()) }
    }
}

/// What the size field of every format must satisfy besides being a number.
pub const END_EXPECTED: &str = "a size that, added to the offset, ends within 2^64 - 1 bytes";

/// `offset + size` in bytes, or an error about the size field `part` when
/// the request would end beyond 2^64 − 1 (every reader refuses such a
/// request, so every later stage can add offset and size without overflow).
#[inline]
pub fn checked_end(line: &[u8], part: &[u8], field: &'static str, offset: u64, size: u64) -> Result<u64, LineError> {
    offset.checked_add(size).ok_or_else(|| LineError::at(line, part, field, END_EXPECTED))
}

/// An unsigned decimal integer (digits only, no sign, no spaces).
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    if b.len() <= 19 {
        // 19 digits cannot overflow: no checked arithmetic on the hot path.
        let mut v: u64 = 0;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + u64::from(d);
        }
        return Some(v);
    }
    if b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// An unsigned decimal integer that fits in 32 bits.
#[inline]
pub fn parse_u32(b: &[u8]) -> Option<u32> {
    parse_u64(b).and_then(|v| u32::try_from(v).ok())
}

/// A non-negative decimal `123` or `123.456` in units of `unit_ns`
/// nanoseconds, converted exactly to nanoseconds (digits finer than 1 ns
/// are dropped, not rounded). Integer arithmetic only: `0.000001850` s is
/// exactly 1,850 ns.
#[inline]
pub fn parse_decimal_ns(b: &[u8], unit_ns: u64) -> Option<u64> {
    let (int, frac) = match memchr::memchr(b'.', b) {
        Some(p) => (&b[..p], &b[p + 1..]),
        None => (b, &b[b.len()..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let whole = if int.is_empty() { 0 } else { parse_u64(int)? };
    let mut ns = whole.checked_mul(unit_ns)?;
    if !frac.is_empty() {
        if !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        ns = ns.checked_add(fraction_ns(frac, unit_ns))?;
    }
    Some(ns)
}

/// `0.frac` units of `unit_ns` in whole nanoseconds (truncated).
#[inline]
fn fraction_ns(frac: &[u8], unit_ns: u64) -> u64 {
    // Units are powers of ten (1, 10^3, 10^6, 10^9 ns): only the first
    // log10(unit) digits matter, and no division is needed.
    let mut pow = 0u32;
    let mut u = unit_ns;
    while u > 1 && u % 10 == 0 {
        u /= 10;
        pow += 1;
    }
    if u == 1 {
        let used = frac.len().min(pow as usize);
        let digits = parse_u64(&frac[..used]).unwrap_or(0);
        return digits * 10u64.pow(pow - used as u32);
    }
    let used = &frac[..frac.len().min(18)];
    let digits = parse_u64(used).unwrap_or(0);
    (u128::from(digits) * u128::from(unit_ns) / 10u128.pow(used.len() as u32)) as u64
}

/// Split a line at a separator byte, trimming ASCII spaces and tabs around
/// each field (CSV as written by hand: `0, 303567, 3584, w, 0.0`).
pub struct CsvFields<'a> {
    rest: Option<&'a [u8]>,
    sep: u8,
}

impl<'a> CsvFields<'a> {
    pub fn new(line: &'a [u8], sep: u8) -> Self {
        CsvFields { rest: Some(line), sep }
    }
}

impl<'a> Iterator for CsvFields<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let (field, next) = match rest.iter().position(|&c| c == self.sep) {
            Some(p) => (&rest[..p], Some(&rest[p + 1..])),
            None => (rest, None),
        };
        self.rest = next;
        Some(trim(field))
    }
}

/// Split a line into runs of non-blank bytes (blank: space or tab).
#[derive(Clone)]
pub struct Words<'a> {
    rest: &'a [u8],
}

impl<'a> Words<'a> {
    pub fn new(line: &'a [u8]) -> Self {
        Words { rest: line }
    }
    /// What is left after the words taken so far (leading blanks removed).
    pub fn remainder(&self) -> &'a [u8] {
        trim(self.rest)
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let r = self.rest;
        let start = r.iter().position(|&c| !is_blank(c))?;
        let r = &r[start..];
        let end = r.iter().position(|&c| is_blank(c)).unwrap_or(r.len());
        self.rest = &r[end..];
        Some(&r[..end])
    }
}

#[inline]
pub fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Trim ASCII spaces and tabs at both ends.
#[inline]
pub fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if is_blank(*first) {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if is_blank(*last) {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// Whether a (trimmed) line is blank or a `#` comment.
#[inline]
pub fn is_blank_or_comment(line: &[u8]) -> bool {
    match line.iter().find(|&&c| !is_blank(c)) {
        None => true,
        Some(&c) => c == b'#',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_reject_signs_spaces_and_overflow() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"1 "), None);
        assert_eq!(parse_u32(b"4294967296"), None);
    }

    #[test]
    fn decimals_convert_exactly_to_nanoseconds() {
        assert_eq!(parse_decimal_ns(b"0.000001850", 1_000_000_000), Some(1850));
        assert_eq!(parse_decimal_ns(b"13.191135", 1_000_000), Some(13_191_135));
        assert_eq!(parse_decimal_ns(b"938513000", 1), Some(938_513_000));
        assert_eq!(parse_decimal_ns(b"1.5", 1), Some(1));
        assert_eq!(parse_decimal_ns(b".5", 1000), Some(500));
        assert_eq!(parse_decimal_ns(b"2.", 1000), Some(2000));
        assert_eq!(parse_decimal_ns(b".", 1000), None);
        assert_eq!(parse_decimal_ns(b"1.2.3", 1000), None);
        assert_eq!(parse_decimal_ns(b"1e3", 1000), None);
        assert_eq!(parse_decimal_ns(b"99999999999", 1_000_000_000), None);
    }

    #[test]
    fn fields_split_and_trim() {
        let f: Vec<&[u8]> = CsvFields::new(b"0, 303567 ,3584,w,", b',').collect();
        assert_eq!(f, vec![&b"0"[..], b"303567", b"3584", b"w", b""], "trailing separator gives an empty field");
        let w: Vec<&[u8]> = Words::new(b"  8,16   5 \t 1  ").collect();
        assert_eq!(w, vec![&b"8,16"[..], b"5", b"1"]);
    }
}
