//! A JSON writer for serde, for the guest's output (a step's report and session).
//!
//! serde_json escapes strings one byte at a time; in wasm under fuel metering that loop would
//! be the largest single item of a step's profile (about a seventh of the guest's time). This
//! writer checks eight bytes at a time for anything to escape and copies clean runs whole.
//! Its output is the JSON serde_json writes (same escapes, `itoa` integers, `zmij` floats,
//! `null` for non-finite floats); `tests` compare the two.

use serde::ser::{self, Impossible, Serialize};
use std::fmt::Display;

/// Serialises `value` as compact JSON.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut w = Writer {
        out: Vec::with_capacity(512),
    };
    value.serialize(&mut w)?;
    // Only valid UTF-8 (from `&str`s) and ASCII were written.
    String::from_utf8(w.out).map_err(|e| Error(e.to_string()))
}

/// What every write answers.
type Wrote = Result<(), Error>;
/// A sequence or map started.
type Opened<'a> = Result<Compound<'a>, Error>;

#[derive(Debug)]
pub struct Error(String);

impl Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

struct Writer {
    out: Vec<u8>,
}

/// The `serialize_<int>` methods: as a JSON number (`int`), or quoted as a map key (`key`).
macro_rules! integers {
    (int: $($name:ident $t:ty),*) => {$(
        fn $name(self, v: $t) -> Wrote {
            self.int(v);
            Ok(())
        }
    )*};
    (key: $($name:ident $t:ty),*) => {$(
        fn $name(self, v: $t) -> Wrote {
            self.quoted(itoa::Buffer::new().format(v))
        }
    )*};
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes is a control character, `"` or `\`.
#[inline]
fn has_escape(w: u64) -> bool {
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * b'\\' as u64);
    let backslash = b.wrapping_sub(ONES) & !b;
    (below_space | quote | backslash) & HIGH != 0
}

/// Per byte: 0 = written as it is, `u` = `\u00XX`, else the letter after the backslash.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    // Clean runs of eight bytes are skipped whole; the rest is looked up byte by byte.
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let w = u64::from_le_bytes([
                bytes[i],
                bytes[i + 1],
                bytes[i + 2],
                bytes[i + 3],
                bytes[i + 4],
                bytes[i + 5],
                bytes[i + 6],
                bytes[i + 7],
            ]);
            if !has_escape(w) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let e = ESCAPE[b as usize];
        i += 1;
        if e == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i - 1]);
        if e == b'u' {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', e]);
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A struct's field name: Rust identifiers (or their serde renames), which never need
/// escaping, so they are written without a scan.
fn write_field_name(out: &mut Vec<u8>, key: &str) {
    debug_assert!(key.bytes().all(|b| ESCAPE[b as usize] == 0), "{key}");
    out.reserve(key.len() + 3);
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

impl Writer {
    fn int(&mut self, v: impl itoa::Integer) {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    fn float(&mut self, v: f64) {
        if v.is_finite() {
            self.out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.extend_from_slice(b"null");
        }
    }
}

/// A sequence or map being written: whether a comma is due before the next item.
pub struct Compound<'a> {
    w: &'a mut Writer,
    first: bool,
    /// Closing text: `]`, `}`, or `]}` / `}}` for enum variants.
    close: &'static [u8],
}

impl<'a> Compound<'a> {
    /// Writes `open` and starts a compound that `close` ends.
    fn open(w: &'a mut Writer, open: &[u8], close: &'static [u8]) -> Self {
        w.out.extend_from_slice(open);
        Compound {
            w,
            first: true,
            close,
        }
    }

    /// An enum variant's compound: `{"variant":` then `open`.
    fn of_variant(w: &'a mut Writer, variant: &str, open: &[u8], close: &'static [u8]) -> Self {
        w.out.push(b'{');
        write_str(&mut w.out, variant);
        w.out.push(b':');
        Compound::open(w, open, close)
    }

    /// Writes the closing text.
    fn finish(self) -> Wrote {
        self.w.out.extend_from_slice(self.close);
        Ok(())
    }

    fn comma(&mut self) {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
    }
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Wrote {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    integers!(int: serialize_i8 i8, serialize_i16 i16, serialize_i32 i32, serialize_i64 i64,
        serialize_i128 i128, serialize_u8 u8, serialize_u16 u16, serialize_u32 u32,
        serialize_u64 u64, serialize_u128 u128);
    fn serialize_f32(self, v: f32) -> Wrote {
        if v.is_finite() {
            self.out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Wrote {
        self.float(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Wrote {
        write_str(&mut self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Wrote {
        write_str(&mut self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Wrote {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Wrote {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Wrote {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Wrote {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Wrote {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Wrote {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Wrote {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T>(self, _: &str, _: u32, name: &str, value: &T) -> Wrote
    where
        T: Serialize + ?Sized,
    {
        self.out.push(b'{');
        write_str(&mut self.out, name);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Opened<'a> {
        Ok(Compound::open(self, b"[", b"]"))
    }
    fn serialize_tuple(self, len: usize) -> Opened<'a> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Opened<'a> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(self, _: &str, _: u32, name: &str, _: usize) -> Opened<'a> {
        Ok(Compound::of_variant(self, name, b"[", b"]}"))
    }
    fn serialize_map(self, _: Option<usize>) -> Opened<'a> {
        Ok(Compound::open(self, b"{", b"}"))
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Opened<'a> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(self, _: &str, _: u32, name: &str, _: usize) -> Opened<'a> {
        Ok(Compound::of_variant(self, name, b"{", b"}}"))
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Wrote {
        self.comma();
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Wrote {
        self.finish()
    }
}

/// Kinds written as another kind is: tuples of every kind as arrays (`SerializeSeq`), a
/// struct variant's fields as a struct's. Each forwards its add method and `end`.
macro_rules! written_as {
    ($($kind:ident :: $add:ident ($($arg:ident: $ty:ty),*) => $like:ident :: $to:ident),* $(,)?) => {$(
        impl ser::$kind for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn $add<T: Serialize + ?Sized>(&mut self, $($arg: $ty),*) -> Wrote {
                ser::$like::$to(self, $($arg),*)
            }
            fn end(self) -> Wrote {
                ser::$like::end(self)
            }
        }
    )*};
}

written_as!(
    SerializeTuple::serialize_element(value: &T) => SerializeSeq::serialize_element,
    SerializeTupleStruct::serialize_field(value: &T) => SerializeSeq::serialize_element,
    SerializeTupleVariant::serialize_field(value: &T) => SerializeSeq::serialize_element,
    SerializeStructVariant::serialize_field(key: &'static str, value: &T)
        => SerializeStruct::serialize_field,
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Wrote {
        self.comma();
        key.serialize(KeyWriter(&mut *self.w))?;
        self.w.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Wrote {
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Wrote {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Wrote {
        self.comma();
        write_field_name(&mut self.w.out, key);
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Wrote {
        self.finish()
    }
}

/// Map keys: strings as they are, integers, booleans and chars quoted (as serde_json does).
struct KeyWriter<'a>(&'a mut Writer);

fn key_error() -> Error {
    Error("a JSON object key must be a string".into())
}

impl KeyWriter<'_> {
    fn quoted(self, text: &str) -> Wrote {
        write_str(&mut self.0.out, text);
        Ok(())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Wrote {
        self.quoted(v)
    }
    fn serialize_char(self, v: char) -> Wrote {
        self.quoted(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_bool(self, v: bool) -> Wrote {
        self.quoted(if v { "true" } else { "false" })
    }
    integers!(key: serialize_i8 i8, serialize_i16 i16, serialize_i32 i32, serialize_i64 i64,
        serialize_u8 u8, serialize_u16 u16, serialize_u32 u32, serialize_u64 u64);
    fn serialize_f32(self, _: f32) -> Wrote {
        Err(key_error())
    }
    fn serialize_f64(self, _: f64) -> Wrote {
        Err(key_error())
    }
    fn serialize_bytes(self, _: &[u8]) -> Wrote {
        Err(key_error())
    }
    fn serialize_none(self) -> Wrote {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Wrote {
        Err(key_error())
    }
    fn serialize_unit(self) -> Wrote {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Wrote {
        Err(key_error())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Wrote {
        self.quoted(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Wrote {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Wrote {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::to_string;
    use runtime_core::testing::{OfflineHost, fresh_session};
    use runtime_core::{Message, compile_source, converse};
    use serde_json::json;

    #[test]
    fn writes_what_serde_json_writes() {
        let mut long = String::new();
        for i in 0..300u32 {
            long.push(char::from_u32(i).unwrap_or('x'));
            long.push_str("abcdefghij");
        }
        let values = [
            json!(null),
            json!(true),
            json!([1, -2, 3.5, 1e300, -0.0, 12345678901234567890u64, i64::MIN]),
            json!("plain"),
            json!("quote \" backslash \\ newline \n tab \t cr \r bell \u{7} nul \u{0} del \u{7f}"),
            json!("ünïcödé ✓ 😀 and \u{1f} at the end\u{8}\u{c}"),
            json!(long),
            json!({"a": {"b": [{}, [], "", {"c\"d": 1}]}, "e": null}),
            json!("12345678\"12345678\\1234567\n"),
        ];
        for v in &values {
            assert_eq!(to_string(v).unwrap(), serde_json::to_string(v).unwrap());
        }
        // Every short string around the 8-byte chunk edges, with an escape in each position.
        for len in 0..20 {
            for pos in 0..len {
                let mut s: Vec<char> = "abcdefghijklmnopqrstu".chars().take(len).collect();
                for esc in ['"', '\\', '\n', '\u{1}', 'é'] {
                    s[pos] = esc;
                    let text: String = s.iter().collect();
                    assert_eq!(
                        to_string(&text).unwrap(),
                        serde_json::to_string(&text).unwrap()
                    );
                }
            }
        }
    }

    #[test]
    fn writes_step_results_as_serde_json_does() {
        let bot = compile_source(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../examples/pizza/bot.yml"
            ))
            .unwrap(),
        )
        .unwrap()
        .bot;
        let mut s = fresh_session();
        let mut h = OfflineHost::default();
        for m in [
            Message::text("I want pizza"),
            Message::data(json!({"type": "pizza", "pizza": "pepperoni"})),
            Message::text("2"),
            Message::data(json!({"type": "confirm", "confirm": "yes"})),
        ] {
            let r = converse(&bot, &s, m, &mut h).unwrap();
            assert_eq!(to_string(&r).unwrap(), serde_json::to_string(&r).unwrap());
            let (report, session) = r.clone().into_parts();
            assert_eq!(
                to_string(&report).unwrap(),
                serde_json::to_string(&report).unwrap()
            );
            assert_eq!(
                to_string(&session).unwrap(),
                serde_json::to_string(&session).unwrap()
            );
            s = r.session;
        }
    }
}
