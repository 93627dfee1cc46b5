//! Differential tests of the browser's JSON writer (`json::write` and the generated `Fields`)
//! against serde_json 1.0 with the workspace's features: our bytes must be serde_json's bytes.
//!
//! - strings: every ASCII byte at every position a word of the eight-bytes-at-a-time scan can
//!   put it (alone and before a second special byte), multi-byte characters across word
//!   boundaries (those whose bytes are an escaped byte plus 0x80 too), long and random strings;
//! - numbers: `int` on i32 extremes and random values, `number` and `double` on float extremes
//!   and random bit patterns;
//! - `value`: random `prost_types::Value` trees, each built beside the `serde_json::Value`
//!   serde_json is to write for it (a non-finite number is `null`, a `Struct`'s keys in its
//!   `BTreeMap` order);
//! - every answer message with a generated `Fields`: random messages (built from the proto's
//!   descriptor, so none is left out), whose bytes must be canonical for serde_json
//!   ([`json_check::canonical`]).

use std::collections::BTreeMap;

use graph_ascend_proto as pb;
use graph_ascend_proto::json::{self, write};
use graph_ascend_proto::json_check::{self, canonical, compare, Difference};
use prost::Message;
use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

#[track_caller]
fn check(result: Result<(), Difference>) {
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// serde_json's compact bytes of `value` (one it can always write).
fn serde_bytes<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("serde_json writes it")
}

/// What `write` appends to an empty buffer.
fn written(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    write(&mut out);
    out
}

#[track_caller]
fn same_string(s: &str) {
    check(compare(
        &format!("the string {s:?}"),
        &written(|out| write::string(out, s)),
        &serde_bytes(s),
    ));
}

/// SplitMix64: a small seeded generator, so that a failure is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Non-ASCII characters of each UTF-8 length, at the edges of each length, and those with a
/// byte that is an escaped byte plus 0x80 (`¢` C2 A2 is `"` | 0x80, `Ü` C3 9C is `\` | 0x80,
/// `Ê` C3 8A is `\n` | 0x80, U+009F C2 9F is 0x1f | 0x80): a scan that ignored the high bit
/// would escape them.
const WIDE: [char; 13] = [
    '\u{80}',
    'é',
    '\u{7ff}',
    '\u{800}',
    '€',
    '\u{ffff}',
    '\u{10000}',
    '😀',
    '\u{10ffff}',
    '¢',
    'Ü',
    'Ê',
    '\u{9f}',
];

/// Characters that exercise the escaping: every control character, the two escaped printable
/// ones, DEL and the other ASCII edges, and the non-ASCII ones above.
fn alphabet() -> Vec<char> {
    let mut chars: Vec<char> = (0u8..0x20).map(char::from).collect();
    chars.extend([
        '"', '\\', '\u{7f}', ' ', '!', '#', '/', '[', ']', '~', 'a', 'Z', '0',
    ]);
    chars.extend(WIDE);
    chars
}

/// A string of 0..48 characters, mostly plain (long clean runs) or mostly special, as `rng` picks.
fn random_string(rng: &mut Rng, alphabet: &[char]) -> String {
    let len = rng.below(48);
    let odd = rng.below(5); // how often a character is special, in quarters: never .. always
    (0..len)
        .map(|_| {
            if rng.below(4) < odd {
                *rng.pick(alphabet)
            } else {
                *rng.pick(&['a', 'b', 'x', '.', '_', '0'])
            }
        })
        .collect()
}

/// Each ASCII byte at every position 0..=16 of strings of 0..=24 bytes: every alignment inside a
/// word, in the first, second and third word and in the tail scanned byte by byte; then before
/// a second special byte at every later position (the scan restarts after each escape).
#[test]
fn every_ascii_byte_at_every_position() {
    for b in 0u8..0x80 {
        let c = char::from(b);
        for len in 0..=24 {
            for at in 0..len.min(17) {
                let mut s: Vec<char> = vec!['k'; len];
                s[at] = c;
                same_string(&s.iter().collect::<String>());
                for second in ['\0', '"', '\u{7f}', '\\'] {
                    for then in at + 1..len {
                        let mut s2 = s.clone();
                        s2[then] = second;
                        same_string(&s2.iter().collect::<String>());
                    }
                }
                // The byte from `at` to the end: runs of escapes.
                let run: String = (0..len).map(|i| if i < at { 'k' } else { c }).collect();
                same_string(&run);
            }
        }
        same_string(&String::from(c));
    }
}

/// Multi-byte characters starting at every byte offset 0..=16 (so crossing each word boundary),
/// alone and next to an escaped byte.
#[test]
fn non_ascii_across_word_boundaries() {
    for c in WIDE {
        for len in 0..=24 {
            for at in 0..len.min(17) {
                let before = "k".repeat(at);
                let after = "k".repeat(len - at);
                same_string(&format!("{before}{c}{after}"));
                same_string(&format!("{before}{c}\n{after}"));
                same_string(&format!("{before}\"{c}{after}"));
                same_string(&format!("{before}{c}{c}\\{after}"));
            }
        }
    }
}

#[test]
fn long_strings() {
    let clean = "abcdefgh".repeat(1 << 17);
    same_string(&clean);
    let mut rng = Rng(11);
    let alphabet = alphabet();
    let mut sprinkled: Vec<char> = clean.chars().take(100_000).collect();
    for _ in 0..500 {
        let at = rng.below(sprinkled.len());
        sprinkled[at] = *rng.pick(&alphabet);
    }
    same_string(&sprinkled.iter().collect::<String>());
    same_string(&"\u{1}".repeat(50_000));
    same_string(&"😀\"".repeat(30_000));
}

#[test]
fn random_strings() {
    let alphabet = alphabet();
    for seed in 0..5000 {
        let mut rng = Rng(seed);
        same_string(&random_string(&mut rng, &alphabet));
    }
    // Random bytes that happen to be UTF-8 (mostly ASCII, so most are).
    let mut rng = Rng(0xbeef);
    for _ in 0..5000 {
        let bytes: Vec<u8> = (0..rng.below(40))
            .map(|_| (rng.next() as u8) & if rng.below(8) == 0 { 0xff } else { 0x7f })
            .collect();
        if let Ok(s) = std::str::from_utf8(&bytes) {
            same_string(s);
        }
    }
}

#[test]
fn ints() {
    let mut cases = vec![i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
    for p in 0..10 {
        let ten = 10i32.pow(p);
        cases.extend([ten - 1, ten, ten + 1, -ten + 1, -ten, -ten - 1]);
    }
    let mut rng = Rng(3);
    cases.extend((0..100_000).map(|_| rng.next() as i32));
    cases.extend((0..10_000).map(|_| (rng.next() as i32) >> rng.below(32)));
    for v in cases {
        check(compare(
            &format!("the int {v}"),
            &written(|out| write::int(out, v)),
            &serde_bytes(&v),
        ));
    }
}

/// Doubles at their extremes: zero of both signs, where the format turns exponential (1e16,
/// 1e-7 and around), subnormals, the largest and smallest, and single-precision values.
const FLOATS: [f64; 24] = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    0.1,
    0.3,
    1e15,
    1e16,
    1e17,
    1e20,
    1e21,
    1e22,
    1e-5,
    1e-6,
    1e-7,
    123456789.125,
    5e-324,
    2.2250738585072014e-308,
    f64::MIN_POSITIVE,
    f64::EPSILON,
    f64::MAX,
    f64::MIN,
    16777216.0,
    1e300,
];

/// Every float case: the extremes, their negations, single-precision values and random bits.
fn floats() -> Vec<f64> {
    let mut cases: Vec<f64> = FLOATS.iter().flat_map(|&f| [f, -f]).collect();
    cases.extend(FLOATS.iter().map(|&f| f64::from(f as f32)));
    let mut rng = Rng(5);
    cases.extend((0..100_000).map(|_| f64::from_bits(rng.next())));
    cases.extend((0..50_000).map(|_| f64::from(f32::from_bits(rng.next() as u32))));
    // Short decimals, as statistics are: k / 10^n.
    cases.extend(
        (0..50_000).map(|_| (rng.below(2_000_000) as f64 - 1e6) / 10f64.powi(rng.below(12) as i32)),
    );
    cases
}

/// NaNs of both signs and other payloads, and the infinities.
fn non_finite() -> [f64; 6] {
    [
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff8_0000_dead_beef),
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]
}

#[test]
fn numbers_are_serde_json_f64s() {
    for v in floats().into_iter().chain(non_finite()) {
        // serde_json writes a non-finite f64 as `null`, as `number` must.
        check(compare(
            &format!("the number {v:?} ({:#x})", v.to_bits()),
            &written(|out| write::number(out, v)),
            &serde_bytes(&v),
        ));
    }
}

#[test]
fn doubles_are_numbers_or_protobufs_strings() {
    for v in floats() {
        if v.is_finite() {
            check(compare(
                &format!("the double {v:?} ({:#x})", v.to_bits()),
                &written(|out| write::double(out, v)),
                &serde_bytes(&v),
            ));
        }
    }
    for v in non_finite() {
        let expected = if v.is_nan() {
            "\"NaN\""
        } else if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        };
        let ours = written(|out| write::double(out, v));
        assert_eq!(
            String::from_utf8_lossy(&ours),
            expected,
            "{:#x}",
            v.to_bits()
        );
    }
}

#[test]
fn booleans_nulls_and_arrays() {
    check(compare(
        "true",
        &written(|out| write::boolean(out, true)),
        b"true",
    ));
    check(compare(
        "false",
        &written(|out| write::boolean(out, false)),
        b"false",
    ));
    check(compare(
        "null",
        &written(write::null),
        &serde_bytes(&Value::Null),
    ));
    let alphabet = alphabet();
    for seed in 0..500 {
        let mut rng = Rng(seed);
        let strings: Vec<String> = (0..rng.below(6))
            .map(|_| random_string(&mut rng, &alphabet))
            .collect();
        check(compare(
            "strings",
            &written(|out| write::strings(out, &strings)),
            &serde_bytes(&strings),
        ));
        let ints: Vec<i32> = (0..rng.below(6)).map(|_| rng.next() as i32).collect();
        check(compare(
            "ints",
            &written(|out| write::array(out, &ints, |out, v| write::int(out, *v))),
            &serde_bytes(&ints),
        ));
    }
}

/// A random `Value` at most `depth` levels deep, and the `serde_json::Value` serde_json is to
/// write for it.
fn value_pair(rng: &mut Rng, alphabet: &[char], depth: u32) -> (prost_types::Value, Value) {
    let (kind, expected) = match rng.below(if depth == 0 { 6 } else { 8 }) {
        0 => (None, Value::Null),
        1 => (Some(Kind::NullValue(0)), Value::Null),
        2 => {
            let b = rng.below(2) == 0;
            (Some(Kind::BoolValue(b)), Value::Bool(b))
        }
        3 => {
            let f = match rng.below(4) {
                0 => *rng.pick(&non_finite()),
                1 => *rng.pick(&FLOATS),
                2 => f64::from(rng.next() as i32),
                _ => f64::from_bits(rng.next()),
            };
            let expected = Number::from_f64(f).map_or(Value::Null, Value::Number);
            (Some(Kind::NumberValue(f)), expected)
        }
        4 | 5 => {
            let s = random_string(rng, alphabet);
            (Some(Kind::StringValue(s.clone())), Value::String(s))
        }
        6 => {
            let (values, expected): (Vec<_>, Vec<_>) = (0..rng.below(5))
                .map(|_| value_pair(rng, alphabet, depth - 1))
                .unzip();
            (
                Some(Kind::ListValue(prost_types::ListValue { values })),
                Value::Array(expected),
            )
        }
        _ => {
            let mut fields = BTreeMap::new();
            let mut expected = BTreeMap::new();
            for _ in 0..rng.below(5) {
                let key = random_string(rng, alphabet);
                let (v, e) = value_pair(rng, alphabet, depth - 1);
                fields.insert(key.clone(), v);
                expected.insert(key, e);
            }
            // The order serde_json is given is the `BTreeMap`'s, which `Struct` keeps.
            let expected: Map<String, Value> = expected.into_iter().collect();
            (
                Some(Kind::StructValue(prost_types::Struct { fields })),
                Value::Object(expected),
            )
        }
    };
    (prost_types::Value { kind }, expected)
}

#[test]
fn random_value_trees() {
    let alphabet = alphabet();
    for seed in 0..5000 {
        let mut rng = Rng(seed);
        let (value, expected) = value_pair(&mut rng, &alphabet, 5);
        let ours = written(|out| write::value(out, &value));
        check(compare(
            &format!("seed {seed}"),
            &ours,
            &serde_bytes(&expected),
        ));
        // The same through the other entry points, where the kind fits.
        match &value.kind {
            Some(Kind::StructValue(s)) => check(compare(
                "struct",
                &written(|out| write::struct_value(out, s)),
                &ours,
            )),
            Some(Kind::ListValue(l)) => check(compare(
                "list",
                &written(|out| write::list_value(out, l)),
                &ours,
            )),
            _ => {}
        }
        check(canonical(&ours));
    }
}

/// `canonical` itself: it must fail on every way our bytes could differ from serde_json's, or
/// the typed-answer checks prove nothing.
#[test]
fn canonical_refuses_what_serde_json_would_not_write() {
    check(canonical(br#"{"a":[1,-2,0.5,"x\n",null,true],"b":{}}"#));
    for other in [
        &br#"{"a": 1}"#[..],       // spacing
        br#"{"b":1,"a":2,"b":3}"#, // a duplicate key
        br#""\u000A""#,            // an escape written another way
        br#""\u001F""#,            // upper-case hex
        br#""\/""#,                // an escape serde_json does not use
        b"1.0e20",                 // a number's format
        b"1E+20",
        b"0.10",
        b"-0",
        b"\"\x7f\"".as_slice(), // not an error: DEL is written as it is
        b"[1,]",                // not JSON
        b"",
    ] {
        let result = canonical(other);
        if other == b"\"\x7f\"" {
            assert_eq!(result, Ok(()));
        } else {
            assert!(
                result.is_err(),
                "{:?} passed",
                String::from_utf8_lossy(other)
            );
        }
    }
}

/// Random field values for the messages of the proto's descriptor.
struct MessageMaker<'a> {
    rng: Rng,
    alphabet: &'a [char],
    /// Makes every string unique (a decimal prefix), so that entries keyed by a string field
    /// (`json_map_key`) never share a key: an object with a duplicate key is not canonical.
    strings: u64,
}

impl MessageMaker<'_> {
    fn string(&mut self) -> String {
        self.strings += 1;
        format!(
            "{}:{}",
            self.strings,
            random_string(&mut self.rng, self.alphabet)
        )
    }

    fn single(&mut self, kind: &prost_reflect::Kind, depth: u32) -> prost_reflect::Value {
        use prost_reflect::{Kind as K, Value as V};
        let rng = &mut self.rng;
        match kind {
            K::Double => V::F64(match rng.below(3) {
                0 => *rng.pick(&non_finite()),
                1 => *rng.pick(&FLOATS),
                _ => f64::from_bits(rng.next()),
            }),
            K::Float => V::F32(f32::from_bits(rng.next() as u32)),
            K::Int32 | K::Sint32 | K::Sfixed32 => V::I32(match rng.below(2) {
                0 => *rng.pick(&[i32::MIN, -1, 0, 1, i32::MAX]),
                _ => rng.next() as i32,
            }),
            K::Int64 | K::Sint64 | K::Sfixed64 => V::I64(rng.next() as i64),
            K::Uint32 | K::Fixed32 => V::U32(rng.next() as u32),
            K::Uint64 | K::Fixed64 => V::U64(rng.next()),
            K::Bool => V::Bool(rng.below(2) == 0),
            K::String => V::String(self.string()),
            K::Bytes => V::Bytes(self.string().into_bytes().into()),
            K::Enum(e) => {
                let numbers: Vec<i32> = e.values().map(|v| v.number()).collect();
                V::EnumNumber(*rng.pick(&numbers))
            }
            K::Message(m) => V::Message(self.message(m, depth.saturating_sub(1))),
        }
    }

    fn field(
        &mut self,
        field: &prost_reflect::FieldDescriptor,
        depth: u32,
    ) -> prost_reflect::Value {
        use prost_reflect::{Kind as K, MapKey, Value as V};
        let kind = field.kind();
        // No deeper messages below depth 0: lists and maps of messages stay empty there.
        let len = if depth == 0 && matches!(kind, K::Message(_)) {
            0
        } else {
            self.rng.below(4)
        };
        if field.is_map() {
            let K::Message(entry) = kind else {
                unreachable!("a map field's kind is its entry message")
            };
            let value_kind = entry.map_entry_value_field().kind();
            let mut map = std::collections::HashMap::new();
            for _ in 0..len {
                let key = match entry.map_entry_key_field().kind() {
                    K::String => MapKey::String(self.string()),
                    other => panic!("no test keys of kind {other:?}"),
                };
                map.insert(key, self.single(&value_kind, depth));
            }
            V::Map(map)
        } else if field.is_list() {
            V::List((0..len).map(|_| self.single(&kind, depth)).collect())
        } else {
            self.single(&kind, depth)
        }
    }

    /// A message of `descriptor` with every field set (or, for fields with presence, sometimes
    /// not), at most one member of each oneof, nested messages at most `depth` levels deep.
    fn message(
        &mut self,
        descriptor: &prost_reflect::MessageDescriptor,
        depth: u32,
    ) -> prost_reflect::DynamicMessage {
        let mut message = prost_reflect::DynamicMessage::new(descriptor.clone());
        for field in descriptor.fields() {
            let in_oneof = field.containing_oneof().is_some_and(|o| !o.is_synthetic());
            let message_kind = matches!(field.kind(), prost_reflect::Kind::Message(_));
            if in_oneof
                || (field.supports_presence() && self.rng.below(4) == 0)
                || (depth == 0 && message_kind && !field.is_list())
            {
                continue;
            }
            let value = self.field(&field, depth);
            message.set_field(&field, value);
        }
        for oneof in descriptor.oneofs().filter(|o| !o.is_synthetic()) {
            let members: Vec<_> = oneof.fields().collect();
            let chosen = self.rng.below(members.len() + 1);
            if let Some(field) = members.get(chosen) {
                if depth > 0 || !matches!(field.kind(), prost_reflect::Kind::Message(_)) {
                    let value = self.field(field, depth);
                    message.set_field(field, value);
                }
            }
        }
        message
    }
}

/// Random messages of type `T` (named `name` in the proto): their browser JSON is canonical for
/// serde_json.
fn random_answers<T: json::Fields + Message + Default>(
    name: &str,
    pool: &prost_reflect::DescriptorPool,
) {
    let descriptor = pool
        .get_message_by_name(&format!("graph_ascend.v1.{name}"))
        .unwrap_or_else(|| panic!("{name} in the descriptor"));
    let alphabet = alphabet();
    let default = json::to_vec(&T::default());
    check(canonical(&default));
    let mut longest = 0;
    for seed in 0..150 {
        let mut maker = MessageMaker {
            rng: Rng(seed),
            alphabet: &alphabet,
            strings: 0,
        };
        let dynamic = maker.message(&descriptor, 4);
        let message = T::decode(dynamic.encode_to_vec().as_slice())
            .unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
        let bytes = json::to_vec(&message);
        if let Err(e) = canonical(&bytes) {
            panic!("{name} seed {seed}: {e}");
        }
        longest = longest.max(bytes.len());
    }
    // Fields were filled: the random answers are not all the default one.
    assert!(
        longest > default.len(),
        "{name}: nothing random in {longest} bytes"
    );
}

/// Every message with a generated `Fields` (`browser_json.rs`), listed once here.
macro_rules! every_answer {
    ($pool:expr; $($name:ident),* $(,)?) => {
        $(random_answers::<pb::$name>(stringify!($name), $pool);)*
    };
}

#[test]
fn every_typed_answer_is_canonical() {
    let pool = prost_reflect::DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET)
        .expect("the compiled descriptor");
    every_answer!(&pool;
        CatalogError, ColorLegend, ConfigInfo, ConfigInfoResponse, ConvertCandidates,
        ConvertCandidatesResponse, ConvertProgress, ConvertStartResponse, DataField,
        DetailColumn, DiagnoseResponse, Diagnosis, DiagnosisGroup, DiagnosisNonFinite, DiagnosisPeer,
        DiagnosisReasonPart, DiagnosisSource, DiagnosisStates, DiagnosisStepCheck, FilterHit,
        FilterNodesResponse, HierarchyResponse, LoadMetaDirResponse, MatchResultResponse,
        MatchedRelations, MatchedRelationsResponse, NamePair, NamedNodeList, NodeDetail,
        NodeInfoResponse, NodeListResponse, NodeStatus, RenderNode, RunFiles,
        SaveMatchedRelationsResponse, SearchNodesData, SearchNodesResponse, SideDetail,
        StatusResponse, TensorSlot,
    );
}

/// `compare`'s message points at the first differing byte.
#[test]
fn compare_names_the_first_difference() {
    let e = compare("x", b"[1,2,3]", b"[1,2,4]").expect_err("they differ");
    assert!(e.to_string().contains("at byte 5"), "{e}");
    let e = compare("x", b"[1]", b"[1]x").expect_err("one is longer");
    assert!(e.to_string().contains("at byte 3"), "{e}");
    assert_eq!(json_check::compare("x", b"1", b"1"), Ok(()));
}
