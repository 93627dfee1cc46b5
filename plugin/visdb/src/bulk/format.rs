//! SQLite file-format primitives: varints, records and their serial types, the order of values
//! in an index, how a payload splits between a page and its overflow chain, and the layout of one
//! b-tree page (header, cell pointer array, cell content packed at the end).

/// `SQLITE_VERSION_NUMBER` of the library bundled with rusqlite, recorded at header offset 96 as
/// "the version that last wrote the file".
pub const SQLITE_VERSION_NUMBER: u32 = 3_054_001;

/// Page types (first byte of a b-tree page header).
pub const INDEX_INTERIOR: u8 = 0x02;
pub const TABLE_INTERIOR: u8 = 0x05;
pub const INDEX_LEAF: u8 = 0x0A;
pub const TABLE_LEAF: u8 = 0x0D;

/// SQLite accounts every cell as at least 4 bytes (`btreeParseCellPtr`), so shorter cells are
/// padded; `integrity_check` would otherwise see overlapping cells.
const MIN_CELL: usize = 4;

/// Size of the database header on page 1.
pub const DB_HEADER: usize = 100;

/// SQLite's page size for our files (see `VisDbWriter::create`).
pub const PAGE_SIZE: usize = 32_768;

/// Length of a SQLite varint (big-endian base-128, 9 bytes carry the full 64 bits).
pub fn varint_len(v: u64) -> usize {
    if v > 0x00ff_ffff_ffff_ffff {
        9
    } else {
        (64 - v.leading_zeros() as usize).max(1).div_ceil(7)
    }
}

/// Writes `v` as a varint at the start of `out` (which must have room) and returns its length.
pub fn put_varint(out: &mut [u8], v: u64) -> usize {
    if v < 0x80 {
        out[0] = v as u8;
        return 1;
    }
    if v > 0x00ff_ffff_ffff_ffff {
        out[8] = v as u8;
        let mut rest = v >> 8;
        for b in out[..8].iter_mut().rev() {
            *b = (rest & 0x7f) as u8 | 0x80;
            rest >>= 7;
        }
        return 9;
    }
    let n = varint_len(v);
    for (i, b) in out[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i);
        let more = if i + 1 < n { 0x80 } else { 0 };
        *b = ((v >> shift) & 0x7f) as u8 | more;
    }
    n
}

#[cfg(test)]
fn push_varint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 9];
    let n = put_varint(&mut buf, v);
    out.extend_from_slice(&buf[..n]);
}

/// One column value, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

impl Value<'_> {
    /// A value bound into an `INTEGER`-affinity column: SQLite stores a REAL that is exactly an
    /// integer as that INTEGER (`sqlite3VdbeIntegerAffinity`), and NaN binds as NULL.
    pub fn integer_affinity(v: Option<f64>) -> Value<'static> {
        match v {
            None => Value::Null,
            Some(r) if r.is_nan() => Value::Null,
            Some(r) => {
                // `as` saturates like `sqlite3RealToI64`; the extremes stay REAL (ticket #3922).
                let i = r as i64;
                if i as f64 == r && i > i64::MIN && i < i64::MAX {
                    Value::Int(i)
                } else {
                    Value::Real(r)
                }
            }
        }
    }

    fn serial_type(&self) -> u64 {
        match *self {
            Value::Null => 0,
            Value::Int(i) => int_serial_type(i),
            Value::Real(_) => 7,
            Value::Text(s) => 13 + 2 * s.len() as u64,
        }
    }

    fn body_len(&self) -> usize {
        match *self {
            Value::Null => 0,
            Value::Int(i) => int_len(int_serial_type(i)),
            Value::Real(_) => 8,
            Value::Text(s) => s.len(),
        }
    }

    /// Writes the body at the start of `out`; returns its length.
    fn put_body(&self, out: &mut [u8]) -> usize {
        match *self {
            Value::Null => 0,
            Value::Int(i) => {
                let n = int_len(int_serial_type(i));
                out[..n].copy_from_slice(&i.to_be_bytes()[8 - n..]);
                n
            }
            Value::Real(r) => {
                out[..8].copy_from_slice(&r.to_bits().to_be_bytes());
                8
            }
            Value::Text(s) => {
                out[..s.len()].copy_from_slice(s.as_bytes());
                s.len()
            }
        }
    }
}

/// The smallest serial type holding `i` (schema format 4: 0 and 1 are types 8 and 9).
fn int_serial_type(i: i64) -> u64 {
    let u = if i < 0 { !i } else { i } as u64;
    match u {
        _ if i == 0 => 8,
        _ if i == 1 => 9,
        0..=127 => 1,
        128..=32_767 => 2,
        32_768..=8_388_607 => 3,
        8_388_608..=2_147_483_647 => 4,
        2_147_483_648..=0x7fff_ffff_ffff => 5,
        _ => 6,
    }
}

fn int_len(serial_type: u64) -> usize {
    match serial_type {
        1..=4 => serial_type as usize,
        5 => 6,
        6 => 8,
        _ => 0,
    }
}

/// Appends an encoding of `v` whose byte order (memcmp, shorter first) is SQLite's order of
/// values with BINARY collation (`sqlite3MemCompare`), so that index keys sort as plain bytes. A class tag (NULL < number < text), then:
/// - a number as its nearest f64 (bits made order-preserving; -0.0 as 0.0) and, for an integer,
///   2 bytes of the difference to that f64 (at most 512 in magnitude), which orders integers
///   exactly and each integer against a REAL the way `sqlite3IntFloatCompare` does;
/// - text with each 0x00 escaped as 0x00 0xFF, ended by 0x00 0x00.
pub fn push_sort_key(v: &Value<'_>, out: &mut Vec<u8>) {
    match *v {
        Value::Null => out.push(0),
        Value::Int(i) => {
            let f = i as f64;
            // Below 2^53 the f64 is exact.
            let rest = if i.unsigned_abs() < 1 << 53 {
                0
            } else {
                (i as i128 - f as i128) as i16
            };
            out.push(1);
            out.extend_from_slice(&ordered_f64(f).to_be_bytes());
            out.extend_from_slice(&((rest as u16) ^ 0x8000).to_be_bytes());
        }
        Value::Real(r) => {
            out.push(1);
            out.extend_from_slice(&ordered_f64(r).to_be_bytes());
            out.extend_from_slice(&0x8000u16.to_be_bytes());
        }
        Value::Text(s) => {
            out.push(2);
            if !s.as_bytes().contains(&0) {
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(&[0, 0]);
                return;
            }
            for part in s.as_bytes().split(|&b| b == 0) {
                out.extend_from_slice(part);
                out.extend_from_slice(&[0, 0xff]);
            }
            // The last part's escape becomes the terminator.
            let end = out.len();
            out[end - 1] = 0;
        }
    }
}

/// One value read back from a sort key.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<'k> {
    Null,
    Int(i64),
    Real(f64),
    Text(std::borrow::Cow<'k, str>),
}

impl Decoded<'_> {
    pub fn value(&self) -> Value<'_> {
        match self {
            Decoded::Null => Value::Null,
            Decoded::Int(i) => Value::Int(*i),
            Decoded::Real(r) => Value::Real(*r),
            Decoded::Text(t) => Value::Text(t),
        }
    }
}

/// One column of a sort key, as read in place.
#[derive(Debug, Clone, Copy)]
enum KeyColumn<'k> {
    Null,
    Number {
        f: f64,
        rest: i16,
    },
    /// Text bytes; `escaped` when they hold 0x00 0xFF pairs (each an escaped NUL).
    Text {
        raw: &'k [u8],
        escaped: bool,
    },
}

impl KeyColumn<'_> {
    /// The column's value as stored: an integer unless `real` (numbers in a key do not say).
    fn number(f: f64, rest: i16, real: bool) -> Value<'static> {
        if real {
            Value::Real(f)
        } else if rest == 0 {
            // Exact below 2^53, and saturating like the wide sum at the extremes.
            Value::Int(f as i64)
        } else {
            Value::Int((f as i128 + i128::from(rest)) as i64)
        }
    }
}

/// Splits the first column off a key made by [`push_sort_key`]; `None` if the bytes are not
/// such a key.
fn next_key_column(key: &[u8]) -> Option<(KeyColumn<'_>, &[u8])> {
    let (&tag, rest) = key.split_first()?;
    match tag {
        0 => Some((KeyColumn::Null, rest)),
        1 => {
            let num = rest.get(..8)?;
            let diff = rest.get(8..10)?;
            let mut b = [0u8; 8];
            b.copy_from_slice(num);
            let f = f64_from_ordered(u64::from_be_bytes(b));
            let rest16 = (u16::from_be_bytes([diff[0], diff[1]]) ^ 0x8000) as i16;
            Some((KeyColumn::Number { f, rest: rest16 }, &rest[10..]))
        }
        2 => {
            // Up to the 0x00 0x00 terminator; 0x00 0xFF is an escaped NUL.
            let mut i = 0;
            let mut escaped = false;
            loop {
                let zero = i + rest.get(i..)?.iter().position(|&b| b == 0)?;
                match rest.get(zero + 1) {
                    Some(0) => {
                        let raw = &rest[..zero];
                        return Some((KeyColumn::Text { raw, escaped }, &rest[zero + 2..]));
                    }
                    Some(0xff) => {
                        escaped = true;
                        i = zero + 2;
                    }
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

/// The text of an escaped key column (each 0x00 0xFF back to 0x00).
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut j = 0;
    while j < raw.len() {
        bytes.push(raw[j]);
        j += if raw[j] == 0 { 2 } else { 1 };
    }
    bytes
}

/// The values of a key made by [`push_sort_key`] (`reals`: a bit for each column that was a
/// REAL); `false` if the bytes are not such a key.
pub fn decode_sort_key<'k>(mut key: &'k [u8], reals: u64, out: &mut Vec<Decoded<'k>>) -> bool {
    while !key.is_empty() {
        let column = out.len();
        let Some((col, rest)) = next_key_column(key) else {
            return false;
        };
        out.push(match col {
            KeyColumn::Null => Decoded::Null,
            KeyColumn::Number { f, rest } => {
                match KeyColumn::number(f, rest, column < 64 && reals >> column & 1 == 1) {
                    Value::Real(r) => Decoded::Real(r),
                    Value::Int(i) => Decoded::Int(i),
                    _ => return false,
                }
            }
            KeyColumn::Text { raw, escaped } => {
                let text = if escaped {
                    match String::from_utf8(unescape(raw)) {
                        Ok(t) => std::borrow::Cow::Owned(t),
                        Err(_) => return false,
                    }
                } else {
                    match std::str::from_utf8(raw) {
                        Ok(t) => std::borrow::Cow::Borrowed(t),
                        Err(_) => return false,
                    }
                };
                Decoded::Text(text)
            }
        });
        key = rest;
    }
    true
}

/// Appends the index record (the key's values…, `rowid`) of a key made by [`push_sort_key`],
/// straight from the key's bytes: the same record as [`encode_record`] of the decoded values
/// and the rowid, without building them. `false` (nothing appended) if the bytes are not such a
/// key or have more than 16 columns (more than any index of ours: [`decode_sort_key`] then).
pub fn key_record(mut key: &[u8], reals: u64, rowid: i64, out: &mut Vec<u8>) -> bool {
    const MAX: usize = 16;
    let mut cols = [KeyColumn::Null; MAX];
    let mut n = 0;
    while !key.is_empty() {
        let Some((col, rest)) = next_key_column(key) else {
            return false;
        };
        if n == MAX {
            return false;
        }
        cols[n] = col;
        n += 1;
        key = rest;
    }
    let cols = &cols[..n];
    // The header (its size, then each column's serial type and the rowid's) is assembled on the
    // stack, then the bodies are appended.
    let real = |i: usize| i < 64 && reals >> i & 1 == 1;
    let rowid_value = Value::Int(rowid);
    let mut types = [0u8; MAX * 9 + 9];
    let mut types_len = 0;
    let mut body_len = rowid_value.body_len();
    for (i, c) in cols.iter().enumerate() {
        let (t, b) = serial_of(*c, real(i));
        types_len += put_varint(&mut types[types_len..], t);
        body_len += b;
    }
    types_len += put_varint(&mut types[types_len..], rowid_value.serial_type());
    let mut size_len = 1;
    while varint_len((types_len + size_len) as u64) > size_len {
        size_len += 1;
    }
    out.reserve(size_len + types_len + body_len);
    let mut size = [0u8; 9];
    let n = put_varint(&mut size, (types_len + size_len) as u64);
    out.extend_from_slice(&size[..n]);
    out.extend_from_slice(&types[..types_len]);
    let mut number = [0u8; 8];
    for (i, c) in cols.iter().enumerate() {
        match *c {
            KeyColumn::Null => {}
            KeyColumn::Number { f, rest } => {
                let n = KeyColumn::number(f, rest, real(i)).put_body(&mut number);
                out.extend_from_slice(&number[..n]);
            }
            KeyColumn::Text {
                raw,
                escaped: false,
            } => out.extend_from_slice(raw),
            KeyColumn::Text { raw, escaped: true } => out.extend_from_slice(&unescape(raw)),
        }
    }
    let n = rowid_value.put_body(&mut number);
    out.extend_from_slice(&number[..n]);
    true
}

/// Serial type and body length of a key column.
fn serial_of(c: KeyColumn<'_>, real: bool) -> (u64, usize) {
    match c {
        KeyColumn::Null => (0, 0),
        KeyColumn::Number { f, rest } => {
            let v = KeyColumn::number(f, rest, real);
            (v.serial_type(), v.body_len())
        }
        KeyColumn::Text { raw, escaped } => {
            let len = if escaped {
                raw.len() - raw.iter().filter(|&&b| b == 0).count()
            } else {
                raw.len()
            };
            (13 + 2 * len as u64, len)
        }
    }
}

/// The inverse of [`ordered_f64`] (0.0 for either zero).
fn f64_from_ordered(bits: u64) -> f64 {
    if bits >> 63 == 1 {
        f64::from_bits(bits & !(1 << 63))
    } else {
        f64::from_bits(!bits)
    }
}

/// f64 bits whose unsigned order is the numeric order (0.0 and -0.0 alike; no NaN is stored).
fn ordered_f64(r: f64) -> u64 {
    let bits = if r == 0.0 { 0 } else { r.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The first column of a sort key as text, for error messages.
pub fn sort_key_text(key: &[u8]) -> String {
    let Some((&2, rest)) = key.split_first() else {
        return format!("{key:02x?}");
    };
    let mut text = Vec::new();
    let mut bytes = rest.iter();
    while let Some(&b) = bytes.next() {
        if b != 0 {
            text.push(b);
        } else if bytes.next() == Some(&0xff) {
            text.push(0);
        } else {
            break;
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// Length of the record of `values`, and of its header.
pub fn record_len(values: &[Value<'_>]) -> (usize, usize) {
    let mut types_len = 0;
    let mut body_len = 0;
    for v in values {
        types_len += varint_len(v.serial_type());
        body_len += v.body_len();
    }
    // The header size counts its own varint.
    let mut size_len = 1;
    while varint_len((types_len + size_len) as u64) > size_len {
        size_len += 1;
    }
    (types_len + size_len + body_len, types_len + size_len)
}

/// Writes the record (header of serial types, then the bodies) of `values` into `out`, which is
/// exactly [`record_len`] long; `header` is its header length.
pub fn write_record(values: &[Value<'_>], header: usize, out: &mut [u8]) {
    let mut at = put_varint(out, header as u64);
    for v in values {
        at += put_varint(&mut out[at..], v.serial_type());
    }
    for v in values {
        at += v.put_body(&mut out[at..]);
    }
}

/// Hands the record of `values` (header length `header`, from [`record_len`]) to `out` piece
/// by piece: the header, then each value's body, texts as they are (not copied), so that a
/// long record can go to its pages without being assembled first.
pub fn record_pieces<E>(
    values: &[Value<'_>],
    header: usize,
    mut out: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut varint = [0u8; 9];
    let n = put_varint(&mut varint, header as u64);
    out(&varint[..n])?;
    for v in values {
        let n = put_varint(&mut varint, v.serial_type());
        out(&varint[..n])?;
    }
    let mut number = [0u8; 8];
    for v in values {
        match *v {
            Value::Text(s) => out(s.as_bytes())?,
            _ => {
                let n = v.put_body(&mut number);
                out(&number[..n])?;
            }
        }
    }
    Ok(())
}

/// Appends the record of `values`.
pub fn encode_record(values: &[Value<'_>], out: &mut Vec<u8>) {
    let (len, header) = record_len(values);
    let start = out.len();
    out.resize(start + len, 0);
    write_record(values, header, &mut out[start..]);
}

/// Page size and the payload limits derived from it (reserved bytes per page: 0).
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub page_size: usize,
}

/// SQLite's lock-byte page: the page holding byte 2^30 of the file (`PENDING_BYTE`), which
/// SQLite never uses. A file of more than 1 GiB whose b-trees use it is "malformed"
/// (regression: the 1M-entry compare, 3.5 GB, was unreadable past row 589,806).
pub fn lock_byte_page(page_size: usize) -> u32 {
    ((1usize << 30) / page_size + 1) as u32
}

impl Geometry {
    /// The page `k` pages after `base` in a run of pages written together, the lock-byte page
    /// skipped (see [`lock_byte_page`]; [`super::file::PageFile`] leaves it blank).
    pub fn page_at(&self, base: u32, k: u32) -> u32 {
        let lock = lock_byte_page(self.page_size);
        let n = base + k;
        if base < lock && n >= lock {
            n + 1
        } else {
            n
        }
    }

    /// Bytes of an overflow page that carry payload (the first 4 link to the next page).
    pub fn overflow_chunk(&self) -> usize {
        self.page_size - 4
    }

    fn min_local(&self) -> usize {
        (self.page_size - 12) * 32 / 255 - 23
    }

    /// Bytes of a table-leaf payload kept on the leaf page.
    pub fn table_local(&self, payload: usize) -> usize {
        self.local(payload, self.page_size - 35)
    }

    /// Bytes of an index payload kept on its (leaf or interior) page.
    pub fn index_local(&self, payload: usize) -> usize {
        self.local(payload, (self.page_size - 12) * 64 / 255 - 23)
    }

    fn local(&self, payload: usize, max_local: usize) -> usize {
        if payload <= max_local {
            return payload;
        }
        let min_local = self.min_local();
        let k = min_local + (payload - min_local) % self.overflow_chunk();
        if k <= max_local {
            k
        } else {
            min_local
        }
    }

    /// Overflow pages of a payload of which `local` bytes stay on the page.
    pub fn overflow_pages(&self, payload: usize, local: usize) -> usize {
        (payload - local).div_ceil(self.overflow_chunk())
    }
}

/// Bytes a cell of `len` takes on its page, with its cell pointer.
pub fn cell_cost(len: usize) -> usize {
    len.max(MIN_CELL) + 2
}

/// Fills one b-tree page: cell pointers grow from the header, cell content from the end of the
/// page, with no freeblocks and no fragmented bytes.
#[derive(Debug, Clone)]
pub struct CellArea {
    kind: u8,
    /// Offset of the b-tree page header: 100 on page 1, 0 elsewhere.
    hdr: usize,
    cells: usize,
    content: usize,
}

impl CellArea {
    pub fn new(kind: u8, hdr: usize, page_size: usize) -> CellArea {
        CellArea {
            kind,
            hdr,
            cells: 0,
            content: page_size,
        }
    }

    fn header_len(&self) -> usize {
        match self.kind {
            INDEX_INTERIOR | TABLE_INTERIOR => 12,
            _ => 8,
        }
    }

    fn pointers_end(&self) -> usize {
        self.hdr + self.header_len() + 2 * self.cells
    }

    /// Bytes left for cells and their pointers.
    pub fn free(&self) -> usize {
        self.content - self.pointers_end()
    }

    pub fn fits(&self, cell_len: usize) -> bool {
        cell_cost(cell_len) <= self.free()
    }

    pub fn cells(&self) -> usize {
        self.cells
    }

    /// Reserves a cell of `len` bytes (checked by [`fits`](Self::fits)) and returns it to fill.
    pub fn push<'d>(&mut self, page: &'d mut [u8], len: usize) -> &'d mut [u8] {
        let size = len.max(MIN_CELL);
        self.content -= size;
        let ptr = self.pointers_end();
        page[ptr..ptr + 2].copy_from_slice(&(self.content as u16).to_be_bytes());
        self.cells += 1;
        page[self.content + len..self.content + size].fill(0);
        &mut page[self.content..self.content + len]
    }

    /// Writes the page header (with `right`, the right-most child, on interior pages) and zeroes
    /// the unused gap.
    pub fn finish(&self, page: &mut [u8], right: u32) {
        let h = self.hdr;
        page[h] = self.kind;
        page[h + 1..h + 3].fill(0);
        page[h + 3..h + 5].copy_from_slice(&(self.cells as u16).to_be_bytes());
        // 65536 (an empty 64 KiB page) is stored as 0.
        page[h + 5..h + 7].copy_from_slice(&(self.content as u16).to_be_bytes());
        page[h + 7] = 0;
        if self.header_len() == 12 {
            page[h + 8..h + 12].copy_from_slice(&right.to_be_bytes());
        }
        let gap = self.pointers_end();
        page[gap..self.content].fill(0);
    }
}

/// The 100-byte database header for a file of `pages` pages.
pub fn db_header(page_size: usize, pages: u32) -> [u8; DB_HEADER] {
    let mut h = [0u8; DB_HEADER];
    h[..16].copy_from_slice(b"SQLite format 3\0");
    // 65536 is stored as 1.
    let size_field = if page_size == 65_536 {
        1
    } else {
        page_size as u16
    };
    h[16..18].copy_from_slice(&size_field.to_be_bytes());
    h[18] = 1; // write version: legacy rollback journal
    h[19] = 1; // read version
    h[20] = 0; // reserved bytes per page
    h[21] = 64; // max embedded payload fraction
    h[22] = 32; // min embedded payload fraction
    h[23] = 32; // leaf payload fraction
    let put = |h: &mut [u8; DB_HEADER], at: usize, v: u32| {
        h[at..at + 4].copy_from_slice(&v.to_be_bytes());
    };
    put(&mut h, 24, 1); // file change counter
    put(&mut h, 28, pages); // database size in pages (valid: offset 92 equals offset 24)
    put(&mut h, 40, 1); // schema cookie
    put(&mut h, 44, 4); // schema format
    put(&mut h, 56, 1); // text encoding: UTF-8
    put(&mut h, 92, 1); // version-valid-for
    put(&mut h, 96, SQLITE_VERSION_NUMBER);
    h
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;

    /// SQLite's order of two values with BINARY collation (`sqlite3MemCompare`): the reference
    /// [`push_sort_key`] is tested against.
    fn compare(a: &Value<'_>, b: &Value<'_>) -> Ordering {
        match (a, b) {
            (Value::Int(x), Value::Int(y)) => x.cmp(y),
            (Value::Real(x), Value::Real(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Value::Int(i), Value::Real(r)) => int_real_compare(*i, *r),
            (Value::Real(r), Value::Int(i)) => int_real_compare(*i, *r).reverse(),
            (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
            _ => class(a).cmp(&class(b)),
        }
    }

    /// `sqlite3IntFloatCompare` without long doubles.
    fn int_real_compare(i: i64, r: f64) -> Ordering {
        if r.is_nan() {
            return Ordering::Greater;
        }
        if r < -9_223_372_036_854_775_808.0 {
            return Ordering::Greater;
        }
        if r >= 9_223_372_036_854_775_808.0 {
            return Ordering::Less;
        }
        match i.cmp(&(r as i64)) {
            Ordering::Equal => (i as f64).partial_cmp(&r).unwrap_or(Ordering::Equal),
            other => other,
        }
    }

    /// Storage class rank in SQLite's sort order: NULL < numbers < TEXT (< BLOB).
    fn class(v: &Value<'_>) -> u8 {
        match v {
            Value::Null => 0,
            Value::Int(_) | Value::Real(_) => 1,
            Value::Text(_) => 2,
        }
    }

    #[test]
    fn varints_round_trip_sqlite_layout() {
        let cases: [(u64, &[u8]); 5] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x81, 0x00]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x81, 0x80, 0x00]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            push_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(varint_len(v), bytes.len());
        }
        let mut out = Vec::new();
        push_varint(&mut out, u64::MAX);
        assert_eq!(out, [0xff; 9]);
        assert_eq!(varint_len(1 << 56), 9);
        assert_eq!(varint_len((1 << 56) - 1), 8);
    }

    #[test]
    fn integers_take_the_smallest_serial_type() {
        let t = int_serial_type;
        assert_eq!((t(0), t(1), t(2), t(-1)), (8, 9, 1, 1));
        assert_eq!((t(127), t(128), t(-128), t(-129)), (1, 2, 1, 2));
        assert_eq!(
            (t(32_768), t(8_388_608), t(1 << 31), t(1 << 47)),
            (3, 4, 5, 6)
        );
        let mut out = Vec::new();
        encode_record(&[Value::Int(-2), Value::Null, Value::Text("ab")], &mut out);
        assert_eq!(out, [4, 1, 0, 17, 0xfe, b'a', b'b']);
    }

    #[test]
    fn reals_that_are_integers_become_integers() {
        let a = Value::integer_affinity;
        assert_eq!(a(Some(1.0)), Value::Int(1));
        assert_eq!(a(Some(-0.0)), Value::Int(0));
        assert_eq!(a(Some(0.5)), Value::Real(0.5));
        assert_eq!(a(Some(f64::NAN)), Value::Null);
        assert_eq!(a(Some(9.3e18)), Value::Real(9.3e18));
        assert_eq!(a(None), Value::Null);
    }

    #[test]
    fn values_sort_like_sqlite() {
        use Ordering::*;
        let c = |a, b| compare(&a, &b);
        assert_eq!(c(Value::Null, Value::Int(-5)), Less);
        assert_eq!(c(Value::Int(1), Value::Real(0.5)), Greater);
        assert_eq!(c(Value::Int(1), Value::Real(1.0)), Equal);
        assert_eq!(c(Value::Real(1e30), Value::Text("")), Less);
        assert_eq!(c(Value::Text("ab"), Value::Text("abc")), Less);
        assert_eq!(c(Value::Text("Z"), Value::Text("a")), Less);
        assert_eq!(c(Value::Text("é"), Value::Text("z")), Greater);
    }

    #[test]
    fn sort_keys_order_like_compare() {
        let big = 1i64 << 53;
        let values = [
            Value::Null,
            Value::Real(f64::NEG_INFINITY),
            Value::Real(-9_223_372_036_854_775_808.0),
            Value::Int(i64::MIN),
            Value::Int(i64::MIN + 1),
            Value::Int(-big - 1),
            Value::Real(-big as f64),
            Value::Int(-1),
            Value::Real(-0.5),
            Value::Real(-0.0),
            Value::Int(0),
            Value::Real(0.0),
            Value::Real(0.5),
            Value::Int(1),
            Value::Real(1.0),
            Value::Int(300),
            Value::Int(big),
            Value::Int(big + 1),
            Value::Real(big as f64 + 2.0),
            Value::Int(i64::MAX - 1),
            Value::Int(i64::MAX),
            Value::Real(9_223_372_036_854_775_808.0),
            Value::Real(f64::INFINITY),
            Value::Text(""),
            Value::Text("\0"),
            Value::Text("\0\0"),
            Value::Text("\0a"),
            Value::Text("\u{1}"),
            Value::Text("a"),
            Value::Text("a\0"),
            Value::Text("a\0b"),
            Value::Text("a\u{1}"),
            Value::Text("ab"),
            Value::Text("é"),
        ];
        let key = |v: &Value<'_>| {
            let mut k = Vec::new();
            push_sort_key(v, &mut k);
            k
        };
        for a in &values {
            for b in &values {
                assert_eq!(key(a).cmp(&key(b)), compare(a, b), "{a:?} vs {b:?}");
            }
        }
        // A key followed by more columns still orders by the first column first.
        let (mut x, mut y) = (key(&Value::Text("a")), key(&Value::Text("a\0")));
        x.extend(key(&Value::Int(9)));
        y.extend(key(&Value::Int(1)));
        assert!(x < y);
        assert_eq!(sort_key_text(&key(&Value::Text("a\0b"))), "a\0b");
    }

    /// The same values sorted by SQLite itself (no affinity: each keeps its type).
    #[test]
    fn sort_keys_order_like_sqlite_order_by() {
        use rusqlite::types::Value as Sql;
        let values = [
            Value::Text("b"),
            Value::Int(i64::MAX),
            Value::Real(9_223_372_036_854_775_808.0),
            Value::Null,
            Value::Real(1.0),
            Value::Int(1),
            Value::Text(""),
            Value::Int(-3),
            Value::Real(-2.5),
            Value::Int((1 << 53) + 1),
            Value::Real((1u64 << 53) as f64),
            Value::Text("a\0"),
            Value::Text("a"),
            Value::Int(i64::MIN),
            Value::Real(-9_223_372_036_854_775_808.0),
            Value::Real(-0.0),
            Value::Int(0),
            Value::Text("Ä"),
            Value::Text("z"),
        ];
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (i INTEGER, v)").unwrap();
        for (i, v) in values.iter().enumerate() {
            let sql = match *v {
                Value::Null => Sql::Null,
                Value::Int(x) => Sql::Integer(x),
                Value::Real(x) => Sql::Real(x),
                Value::Text(x) => Sql::Text(x.into()),
            };
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2)",
                rusqlite::params![i as i64, sql],
            )
            .unwrap();
        }
        let mut stmt = conn.prepare("SELECT i FROM t ORDER BY v, i").unwrap();
        let by_sqlite: Vec<usize> = stmt
            .query_map([], |r| r.get::<_, i64>(0))
            .unwrap()
            .map(|i| i.unwrap() as usize)
            .collect();
        let mut by_key: Vec<(Vec<u8>, usize)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut k = Vec::new();
                push_sort_key(v, &mut k);
                (k, i)
            })
            .collect();
        by_key.sort();
        let by_key: Vec<usize> = by_key.into_iter().map(|(_, i)| i).collect();
        assert_eq!(by_key, by_sqlite);
    }

    #[test]
    fn local_payload_follows_the_spill_formula() {
        let g = Geometry { page_size: 32_768 };
        assert_eq!(g.table_local(32_733), 32_733);
        // min_local 4087, chunk 32764: 4087 + (40000 - 4087) % 32764 = 7236
        assert_eq!(g.table_local(40_000), 7_236);
        assert_eq!(g.index_local(8_198), 8_198);
        assert_eq!(g.index_local(8_199), 4_087);
        assert_eq!(g.index_local(20_000), 4_087);
        assert_eq!(g.overflow_pages(40_000, 7_236), 1);
    }

    /// Values of every kind and edge for the sort key tests: NULL, integers of each serial type
    /// and around 2^53, REALs, texts with NULs, non-ASCII and overflow length.
    fn key_test_values(long: &str) -> Vec<Value<'_>> {
        let mut values: Vec<Value<'_>> = vec![Value::Null];
        for i in [
            0,
            1,
            -1,
            127,
            128,
            255,
            40_000,
            1 << 40,
            1 << 53,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            i64::MAX,
            i64::MIN,
        ] {
            values.push(Value::Int(i));
        }
        for r in [0.5, -2.25, 1e300, -1e-300, 3.0] {
            values.push(Value::Real(r));
        }
        for t in [
            "",
            "a",
            "NPU_0_0_Module.layer",
            "nul\0inside\0",
            "\0",
            "é比😀",
            long,
        ] {
            values.push(Value::Text(t));
        }
        values
    }

    /// The sort key of `values` and its REAL mask.
    fn key_of(values: &[Value<'_>]) -> (Vec<u8>, u64) {
        let mut key = Vec::new();
        values.iter().for_each(|v| push_sort_key(v, &mut key));
        let reals = values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Value::Real(_)))
            .fold(0u64, |m, (i, _)| m | 1 << i);
        (key, reals)
    }

    /// Index records are written again from their sort keys: every value must come back.
    #[test]
    fn sort_keys_decode_to_their_values() {
        let long = "x".repeat(300);
        let values = key_test_values(&long);
        for window in values.windows(3) {
            let (key, reals) = key_of(window);
            let mut out = Vec::new();
            assert!(decode_sort_key(&key, reals, &mut out), "{window:?}");
            let back: Vec<Value<'_>> = out.iter().map(Decoded::value).collect();
            assert_eq!(back, window, "{key:02x?}");
        }
        let mut out = Vec::new();
        assert!(
            !decode_sort_key(&[2, b'a', 0], 0, &mut out),
            "unterminated text"
        );
        assert!(!decode_sort_key(&[1, 0, 0], 0, &mut out), "short number");
        assert!(!decode_sort_key(&[7], 0, &mut out), "unknown tag");
    }

    /// The record written straight from a key is the record of its decoded values and the rowid.
    #[test]
    fn key_records_equal_encoded_records() {
        let long = "x".repeat(300);
        let values = key_test_values(&long);
        for width in 1..=5 {
            for window in values.windows(width) {
                for rowid in [1, 200, 1 << 33] {
                    let (key, reals) = key_of(window);
                    let mut direct = vec![0xAA];
                    assert!(key_record(&key, reals, rowid, &mut direct), "{window:?}");
                    let mut entry = window.to_vec();
                    entry.push(Value::Int(rowid));
                    let mut expected = vec![0xAA];
                    encode_record(&entry, &mut expected);
                    assert_eq!(direct, expected, "{window:?} rowid {rowid}");
                }
            }
        }
        let mut out = Vec::new();
        assert!(
            !key_record(&[2, b'a', 0], 0, 1, &mut out),
            "unterminated text"
        );
        assert!(!key_record(&[1, 0, 0], 0, 1, &mut out), "short number");
        assert!(!key_record(&[7], 0, 1, &mut out), "unknown tag");
        let mut wide = Vec::new();
        (0..17).for_each(|i| push_sort_key(&Value::Int(i), &mut wide));
        assert!(
            !key_record(&wide, 0, 1, &mut out),
            "more columns than it takes"
        );
        assert!(out.is_empty());
    }
}
