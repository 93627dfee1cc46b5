//! Python values as msprobe holds them, and Python's `str()` of them.
//!
//! The `.vis.db` columns store `str(value)` of Python objects (`"1e-05"`, `"True"`, `"[2, 16]"`,
//! `"inf"`), so the exact text must be reproduced: floats use Python's shortest round-trip `repr`
//! with its own switch to exponent notation, which differs from Rust's formatting.

use serde_json::Value;

use crate::json::non_finite_marker;

/// A JSON value seen through Python's eyes (ints and floats kept apart).
#[derive(Debug, Clone, PartialEq)]
pub enum PyVal {
    None,
    Bool(bool),
    Int(i64),
    /// An integer too large for `i64`, kept as its decimal text.
    BigInt(String),
    Float(f64),
    Str(String),
    List(Vec<PyVal>),
    Dict(Vec<(String, PyVal)>),
}

impl PyVal {
    /// Converts parsed JSON, turning non-finite markers back into floats.
    pub fn from_json(v: &Value) -> PyVal {
        match v {
            Value::Null => PyVal::None,
            Value::Bool(b) => PyVal::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyVal::Int(i)
                } else if n.is_u64() {
                    PyVal::BigInt(n.to_string())
                } else {
                    PyVal::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => match non_finite_marker(s) {
                Some(f) => PyVal::Float(f),
                None => PyVal::Str(s.clone()),
            },
            Value::Array(a) => PyVal::List(a.iter().map(PyVal::from_json).collect()),
            Value::Object(o) => PyVal::Dict(
                o.iter()
                    .map(|(k, v)| (k.clone(), PyVal::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Converts a value of the fast reader ([`crate::fastjson`]); same result as
    /// [`PyVal::from_json`] on the `serde_json` reading of the same text.
    pub fn from_jval(v: &crate::fastjson::JVal) -> PyVal {
        use crate::fastjson::JVal;
        match v {
            JVal::Null => PyVal::None,
            JVal::Bool(b) => PyVal::Bool(*b),
            JVal::Int(i) => PyVal::Int(*i),
            JVal::BigUint(u) => PyVal::BigInt(u.to_string()),
            JVal::Float(f) | JVal::NonFinite(f) => PyVal::Float(*f),
            JVal::Str(s) => PyVal::Str(s.to_string()),
            JVal::Arr(_) | JVal::LazyArr(_) => {
                PyVal::List(v.elements().map(|x| PyVal::from_jval(&x)).collect())
            }
            JVal::Obj(o) => PyVal::Dict(
                o.iter()
                    .map(|(k, v)| (k.to_string(), PyVal::from_jval(v)))
                    .collect(),
            ),
        }
    }

    /// Python's `str(value)`.
    pub fn py_str(&self) -> String {
        match self {
            PyVal::Str(s) => s.clone(),
            other => other.py_repr(),
        }
    }

    /// Python's `repr(value)`.
    pub fn py_repr(&self) -> String {
        match self {
            PyVal::None => "None".into(),
            PyVal::Bool(true) => "True".into(),
            PyVal::Bool(false) => "False".into(),
            PyVal::Int(i) => i.to_string(),
            PyVal::BigInt(s) => s.clone(),
            PyVal::Float(f) => float_repr(*f),
            PyVal::Str(s) => str_repr(s),
            PyVal::List(items) => {
                let parts: Vec<String> = items.iter().map(PyVal::py_repr).collect();
                format!("[{}]", parts.join(", "))
            }
            PyVal::Dict(items) => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|(k, v)| format!("{}: {}", str_repr(k), v.py_repr()))
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
        }
    }

    /// The value as a number when Python would treat it as `int`/`float` (not bool).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            PyVal::Int(i) => Some(*i as f64),
            PyVal::Float(f) => Some(*f),
            PyVal::BigInt(s) => s.parse().ok(),
            _ => None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, PyVal::None)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyVal::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Python's `str()` of a value of the fast reader, written to `out`: the text of
/// `PyVal::from_jval(v).py_str()` without building the `PyVal` (a long list is written one
/// element at a time).
pub fn write_jval_py_str(out: &mut dyn std::fmt::Write, v: &crate::fastjson::JVal) {
    match v {
        crate::fastjson::JVal::Str(s) => {
            let _ = out.write_str(s);
        }
        other => write_jval_py_repr(out, other),
    }
}

/// Python's `repr()` of a value of the fast reader, written to `out`.
fn write_jval_py_repr(out: &mut dyn std::fmt::Write, v: &crate::fastjson::JVal) {
    use crate::fastjson::JVal;
    let _ = match v {
        JVal::Null => out.write_str("None"),
        JVal::Bool(true) => out.write_str("True"),
        JVal::Bool(false) => out.write_str("False"),
        JVal::Int(i) => write!(out, "{i}"),
        JVal::BigUint(u) => write!(out, "{u}"),
        JVal::Float(f) | JVal::NonFinite(f) => {
            let mut s = String::with_capacity(24);
            push_float_repr(&mut s, *f);
            out.write_str(&s)
        }
        JVal::Str(s) => out.write_str(&str_repr(s)),
        JVal::Arr(_) | JVal::LazyArr(_) => {
            let _ = out.write_str("[");
            for (i, x) in v.elements().enumerate() {
                if i > 0 {
                    let _ = out.write_str(", ");
                }
                write_jval_py_repr(out, &x);
            }
            out.write_str("]")
        }
        JVal::Obj(fields) => {
            let _ = out.write_str("{");
            for (i, (k, x)) in fields.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_str(", ");
                }
                let _ = out.write_str(&str_repr(k));
                let _ = out.write_str(": ");
                write_jval_py_repr(out, x);
            }
            out.write_str("}")
        }
    };
}

/// Python's `repr(str)` (single quotes unless the text contains one and no double quote).
fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form below 1e-4 or from 1e16.
pub fn float_repr(f: f64) -> String {
    let mut out = String::with_capacity(24);
    push_float_repr(&mut out, f);
    out
}

/// Appends Python's `repr(float)` to `out`.
pub fn push_float_repr(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("nan");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if f == 0.0 {
        out.push_str(if f.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // `ryu` gives the shortest round-trip digits, and when several candidates are equally short
    // it picks the one nearest the exact value, rounding an exact tie half to even, as Python
    // does (Rust's own `{:e}` can round such a 17-digit tie up). This runs for every number of
    // every row, so it works on a stack buffer.
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(f);
    // ryu's plain decimal form ("123.0", "0.00125") is Python's too, except below 1e-4, where
    // Python switches to an exponent: the common case is a copy.
    if !text.contains('e') && !text.trim_start_matches('-').starts_with("0.0000") {
        out.push_str(text);
        return;
    }
    push_python_layout(out, text);
}

/// Lays out the digits of a formatted finite non-zero number as Python's `repr` does.
fn push_python_layout(out: &mut String, text: &str) {
    let Some((neg, digits, exp)) = decimal_parts(text) else {
        out.push_str("nan");
        return;
    };
    let n = digits.len() as i32;
    let digit = |i: usize| -> char { char::from(digits[i]) };
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp + 1;
            for i in 0..int_len {
                out.push(if i < n { digit(i as usize) } else { '0' });
            }
            out.push('.');
            if n <= int_len {
                out.push('0');
            } else {
                for i in int_len..n {
                    out.push(digit(i as usize));
                }
            }
        } else {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            for i in 0..n {
                out.push(digit(i as usize));
            }
        }
    } else {
        out.push(digit(0));
        if n > 1 {
            out.push('.');
            for i in 1..n {
                out.push(digit(i as usize));
            }
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.abs();
        if e < 10 {
            out.push('0');
        }
        if e >= 100 {
            out.push(char::from(b'0' + (e / 100) as u8));
        }
        if e >= 10 {
            out.push(char::from(b'0' + (e / 10 % 10) as u8));
        }
        out.push(char::from(b'0' + (e % 10) as u8));
    }
}

/// Sign, significant digits (no leading or trailing zeros) and the decimal exponent of the first
/// digit of a formatted finite non-zero number (`"-0.00125"`, `"1.5e-7"`, `"1e16"`, `"123.0"`):
/// `(true, b"125", -3)`. `None` when the text has no non-zero digit.
fn decimal_parts(text: &str) -> Option<(bool, DigitBuf, i32)> {
    let (neg, text) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text),
    };
    let (mantissa, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (text, 0),
    };
    let int_len = mantissa.find('.').unwrap_or(mantissa.len()) as i32;
    let mut digits = DigitBuf::default();
    let mut leading_zeros = 0;
    for b in mantissa.bytes().filter(u8::is_ascii_digit) {
        if digits.len == 0 && b == b'0' {
            leading_zeros += 1;
        } else {
            digits.push(b);
        }
    }
    while digits.len > 0 && digits.bytes[digits.len - 1] == b'0' {
        digits.len -= 1;
    }
    if digits.len == 0 {
        return None;
    }
    Some((neg, digits, int_len - leading_zeros - 1 + exp))
}

/// Up to 24 ASCII digits on the stack.
#[derive(Default)]
struct DigitBuf {
    bytes: [u8; 24],
    len: usize,
}

impl DigitBuf {
    fn push(&mut self, b: u8) {
        if self.len < self.bytes.len() {
            self.bytes[self.len] = b;
            self.len += 1;
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Index<usize> for DigitBuf {
    type Output = u8;
    fn index(&self, i: usize) -> &u8 {
        &self.bytes[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        assert_eq!(float_repr(1e-5), "1e-05");
        // A 17-digit tie: Python rounds the exact value half to even.
        let tie: f64 = "2.12195587158203125".parse().expect("a float");
        assert_eq!(float_repr(-tie), "-2.1219558715820312");
        assert_eq!(float_repr(tie), "2.1219558715820312");
        // A 16-digit tie (a float32 widened): half to even too.
        let tie16 = f64::from(569.837_7_f32);
        assert_eq!(tie16, 569.837_707_519_531_2);
        assert_eq!(float_repr(tie16), "569.8377075195312");
        assert_eq!(float_repr(0.0001), "0.0001");
        assert_eq!(float_repr(2.7939677238464355e-09), "2.7939677238464355e-09");
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(8.0), "8.0");
        assert_eq!(float_repr(-0.01), "-0.01");
        assert_eq!(float_repr(123456.5), "123456.5");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1234567890123456.0), "1234567890123456.0");
        assert_eq!(float_repr(f64::INFINITY), "inf");
        assert_eq!(float_repr(-3.814697265625e-06), "-3.814697265625e-06");
        assert_eq!(float_repr(0.0024137496948242188), "0.0024137496948242188");
        assert_eq!(float_repr(1e22), "1e+22");
        assert_eq!(float_repr(1.5e-7), "1.5e-07");
        assert_eq!(float_repr(-1.25e100), "-1.25e+100");
        assert_eq!(float_repr(123.0), "123.0");
        assert_eq!(float_repr(0.5), "0.5");
        assert_eq!(float_repr(-0.0), "-0.0");
    }

    /// Python's digits found another way: the shortest length from Rust's `{:e}`, then Rust's
    /// exact formatting at that length (correctly rounded, ties to even), which is the nearest
    /// decimal of that length. (`{:e}` alone can round an exact tie up: `569.8377075195313`.)
    fn reference_parts(f: f64) -> (bool, Vec<u8>, i32) {
        let shortest = format!("{f:e}");
        let len = shortest
            .split('e')
            .next()
            .unwrap_or("")
            .bytes()
            .filter(u8::is_ascii_digit)
            .count();
        let s = format!("{f:.*e}", len.saturating_sub(1));
        assert_eq!(s.parse::<f64>().unwrap(), f, "{s} round-trips");
        let (neg, d, e) = decimal_parts(&s).unwrap();
        (neg, d.bytes[..d.len].to_vec(), e)
    }

    #[test]
    fn ryu_digits_match_the_exact_reference() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..300_000 {
            let bits = next();
            // Random doubles, float32 values widened (most dump statistics), and short decimals.
            let f = match i % 3 {
                0 => f64::from_bits(bits),
                1 => f64::from(f32::from_bits(bits as u32)),
                _ => (bits % 2_000_001) as f64 / 1000.0 - 1000.0,
            };
            if !f.is_finite() || f == 0.0 {
                continue;
            }
            let mut buf = ryu::Buffer::new();
            let (neg, d, e) = decimal_parts(buf.format_finite(f)).unwrap();
            assert_eq!(
                (neg, d.bytes[..d.len].to_vec(), e),
                reference_parts(f),
                "{f:e}"
            );
            assert_eq!(float_repr(f).parse::<f64>().unwrap(), f);
            // ryu's own decimal layout, where it is used as is, is Python's.
            let mut slow = String::new();
            push_python_layout(&mut slow, buf.format_finite(f));
            assert_eq!(float_repr(f), slow, "{f:e}");
        }
    }

    #[test]
    fn containers_print_like_python() {
        let v = PyVal::List(vec![PyVal::Int(2), PyVal::Int(16)]);
        assert_eq!(v.py_str(), "[2, 16]");
        let v = PyVal::List(vec![PyVal::Str("a".into()), PyVal::None, PyVal::Bool(true)]);
        assert_eq!(v.py_str(), "['a', None, True]");
        assert_eq!(PyVal::List(vec![]).py_str(), "[]");
    }
}
