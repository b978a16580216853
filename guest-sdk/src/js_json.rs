//! JSON values to JavaScript values and back, for the arguments and results of JS calls.
//!
//! The same conversions as boa's `JsValue::from_json` and `to_json` (tests compare them), at
//! a fraction of the cost, since every method call converts its whole context both ways:
//!
//! - objects are made with a *shared* shape (boa's object literals' kind), so building one is
//!   a cached shape transition per key and reading its properties from JavaScript hits the
//!   inline caches; boa's `from_json` gives each object a unique shape, a hash table of its own;
//! - strings come back by copying their Latin-1 or UTF-16 code units, not through a
//!   `Display` writing one character at a time;
//! - cycles are found on the stack of objects being converted, not in a hash set.
//!
//! Semantics kept from boa: integers in the i32 range become int32 values; a property whose
//! key is an array index is an indexed property; going back, an object's own properties are
//! read in [[OwnPropertyKeys]] order (array indexes ascending, then keys in creation order),
//! an accessor property reads as null, `undefined` values are left out of objects and are
//! null in arrays, a lone surrogate is written `\uXXXX`, and a symbol key, a BigInt or a
//! cycle is a TypeError.

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::string::JsStrVariant;
use boa_engine::value::JsVariant;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, js_string,
};
use runtime_core::host::ReadKey;
use serde_json::{Map, Value as Json};

/// `json` as a JavaScript value.
pub fn to_js(json: &Json, ctx: &mut Context) -> JsValue {
    match json {
        Json::Null => JsValue::null(),
        Json::Bool(b) => JsValue::new(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => JsValue::new(i as i32),
            _ => JsValue::new(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => JsValue::new(JsString::from(s.as_str())),
        Json::Array(items) => {
            let items: Vec<JsValue> = items.iter().map(|v| to_js(v, ctx)).collect();
            JsArray::from_iter(items, ctx).into()
        }
        Json::Object(map) => {
            let props: Vec<(JsString, JsValue)> = map
                .iter()
                .map(|(k, v)| (JsString::from(k.as_str()), to_js(v, ctx)))
                .collect();
            let mut init = ObjectInitializer::with_native_data(OrdinaryObject, ctx);
            for (k, v) in props {
                init.property(k, v, Attribute::all());
            }
            init.build().into()
        }
    }
}

/// `value` as JSON; `None` for `undefined`.
pub fn from_js(value: &JsValue, ctx: &mut Context) -> JsResult<Option<Json>> {
    let mut path = Vec::new();
    from_js_inner(value, ctx, &mut path)
}

/// `value` as JSON, an object with only those of `keys` it has (all of them when `keys` is
/// empty); `None` for `undefined`.
pub fn from_js_keys(
    value: &JsValue,
    keys: &[ReadKey],
    ctx: &mut Context,
) -> JsResult<Option<Json>> {
    let obj = match value.as_object() {
        Some(o) if !keys.is_empty() && !o.is_array() => o,
        _ => return from_js(value, ctx),
    };
    let mut path = vec![obj.clone()];
    let mut map = Map::with_capacity(keys.len());
    for k in keys {
        let key = PropertyKey::from(JsString::from(k.name));
        let Some(p) = obj.borrow().properties().get(&key) else {
            continue;
        };
        let v = match p.value().map(|v| v.variant()) {
            Some(JsVariant::Object(inner)) if k.without_meta && !inner.is_array() => {
                Some(nested(&inner, ctx, &mut path, |name| {
                    name.starts_with('$')
                })?)
            }
            _ => property(&obj, &key, ctx, &mut path)?,
        };
        if let Some(v) = v {
            map.insert(k.name.to_string(), v);
        }
    }
    Ok(Some(Json::Object(map)))
}

/// `obj` as JSON, inside the objects of `path` (a cycle if it is one of them). `skip`: its
/// keys left out.
fn nested(
    obj: &JsObject,
    ctx: &mut Context,
    path: &mut Vec<JsObject>,
    skip: impl Fn(&str) -> bool,
) -> JsResult<Json> {
    if path.iter().any(|o| JsObject::equals(o, obj)) {
        return Err(type_error("cyclic object value"));
    }
    path.push(obj.clone());
    let out = object(obj, ctx, path, skip);
    path.pop();
    out
}

/// boa's message for a symbol, as a value or as a key.
const NO_SYMBOLS: &str = "cannot convert Symbol to JSON";

/// The TypeError a value JSON cannot hold raises (boa's messages).
fn type_error(message: &'static str) -> JsError {
    JsNativeError::typ().with_message(message).into()
}

fn from_js_inner(
    value: &JsValue,
    ctx: &mut Context,
    path: &mut Vec<JsObject>,
) -> JsResult<Option<Json>> {
    Ok(Some(match value.variant() {
        JsVariant::Undefined => return Ok(None),
        JsVariant::Null => Json::Null,
        JsVariant::Boolean(b) => Json::Bool(b),
        JsVariant::Integer32(i) => Json::from(i),
        JsVariant::Float64(f) => Json::from(f),
        JsVariant::String(s) => Json::String(std_string(&s)),
        JsVariant::BigInt(_) => return Err(type_error("cannot convert bigint to JSON")),
        JsVariant::Symbol(_) => return Err(type_error(NO_SYMBOLS)),
        JsVariant::Object(obj) => nested(&obj, ctx, path, |_| false)?,
    }))
}

/// An own property's value as JSON: null for an accessor or a missing key.
fn property(
    obj: &JsObject,
    key: &PropertyKey,
    ctx: &mut Context,
    path: &mut Vec<JsObject>,
) -> JsResult<Option<Json>> {
    let value = obj
        .borrow()
        .properties()
        .get(key)
        .and_then(|p| p.value().cloned());
    match value {
        Some(v) => from_js_inner(&v, ctx, path),
        None => Ok(Some(Json::Null)),
    }
}

/// An object or array as JSON; `path` ends with it. `skip`: the object's keys left out.
fn object(
    obj: &JsObject,
    ctx: &mut Context,
    path: &mut Vec<JsObject>,
    skip: impl Fn(&str) -> bool,
) -> JsResult<Json> {
    if obj.is_array() {
        let len = obj.get(js_string!("length"), ctx)?.to_length(ctx)?;
        let mut items = Vec::with_capacity(len.min(1 << 16) as usize);
        for i in 0..len {
            let key = PropertyKey::from(i as u32);
            items.push(property(obj, &key, ctx, path)?.unwrap_or(Json::Null));
        }
        return Ok(Json::Array(items));
    }
    // [[OwnPropertyKeys]]: array indexes ascending, then string keys in creation order, then
    // symbols (a proxy's trap runs here, as under JSON.stringify).
    let keys = obj.own_property_keys(ctx)?;
    let mut map = Map::with_capacity(keys.len());
    for key in keys {
        let name = match &key {
            PropertyKey::String(s) => std_string(s),
            PropertyKey::Index(i) => i.get().to_string(),
            PropertyKey::Symbol(_) => return Err(type_error(NO_SYMBOLS)),
        };
        if skip(&name) {
            continue;
        }
        if let Some(v) = property(obj, &key, ctx, path)? {
            map.insert(name, v);
        }
    }
    Ok(Json::Object(map))
}

/// A JavaScript string as Rust text; lone surrogates written `\uXXXX` (boa's escaped form).
fn std_string(s: &JsString) -> String {
    match s.as_str().variant() {
        JsStrVariant::Latin1(bytes) => match std::str::from_utf8(bytes) {
            Ok(ascii) if bytes.is_ascii() => ascii.to_owned(),
            _ => bytes.iter().copied().map(char::from).collect(),
        },
        JsStrVariant::Utf16(units) => {
            String::from_utf16(units).unwrap_or_else(|_| s.to_std_string_escaped())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boa_engine::Source;
    use serde_json::json;

    /// Our conversions give what boa's give, both ways.
    #[test]
    fn the_conversions_agree_with_boas() {
        let mut ctx = Context::default();
        let samples = [
            json!(null),
            json!(true),
            json!(7),
            json!(-2147483648),
            json!(2147483648i64),
            json!(9007199254740993i64),
            json!(1.5),
            json!("ascii"),
            json!("é ü ñ"),
            json!("日本 😀"),
            json!([1, "two", null, [3], {"four": 4}]),
            json!({"b": 1, "a": {"nested": [true, false]}, "0": "index", "10": "ten", "x-y": null}),
            json!({}),
            json!([]),
        ];
        for s in &samples {
            let ours = to_js(s, &mut ctx);
            let boas = JsValue::from_json(s, &mut ctx).unwrap();
            let back = boas.to_json(&mut ctx).unwrap();
            assert_eq!(from_js(&ours, &mut ctx).unwrap(), back, "{s}");
            assert_eq!(from_js(&boas, &mut ctx).unwrap(), back, "{s}");
        }
        let script = r#"
            var o = { z: 1, u: undefined, 2: 'two', 1: 'one', s: '\uD800 lone', arr: [undefined, 1],
                      d: new Date(0), m: new Map([[1, 2]]) };
            Object.defineProperty(o, 'hidden', { value: 'h', enumerable: false });
            Object.defineProperty(o, 'acc', { get: function () { return 5; }, enumerable: true });
            var sparse = [1]; sparse[3] = 4;
            // A function's prototype points back at it: a cycle both ways.
            [o, sparse, 'x\uDC00', -0, 0.1 + 0.2, NaN, Infinity, undefined, { f: function () {} }]
        "#;
        let values = ctx.eval(Source::from_bytes(script)).unwrap();
        let values = values.as_object().unwrap().clone();
        for i in 0..9u32 {
            let v = values.get(i, &mut ctx).unwrap();
            let text = |r: JsResult<Option<Json>>| r.map_err(|e| e.to_string());
            assert_eq!(
                text(from_js(&v, &mut ctx)),
                text(v.to_json(&mut ctx)),
                "item {i}"
            );
        }
    }

    #[test]
    fn cycles_symbols_and_bigints_are_type_errors() {
        let mut ctx = Context::default();
        for script in [
            "var a = {}; a.self = a; a",
            "var b = [1]; b.push({ back: b }); b",
            "({ [Symbol('s')]: 1 })",
            "10n",
            "({ big: 1n })",
        ] {
            let v = ctx.eval(Source::from_bytes(script)).unwrap();
            let err = from_js(&v, &mut ctx).unwrap_err();
            assert!(err.to_string().contains("TypeError"), "{script}: {err}");
            assert!(v.to_json(&mut ctx).is_err(), "boa agrees on {script}");
        }
        // The same object twice, not nested in itself, is no cycle.
        let v = ctx
            .eval(Source::from_bytes(
                "var s = { k: 1 }; ({ a: s, b: [s, s] })",
            ))
            .unwrap();
        assert_eq!(
            from_js(&v, &mut ctx).unwrap(),
            Some(json!({"a": {"k": 1}, "b": [{"k": 1}, {"k": 1}]}))
        );
    }

    #[test]
    fn reading_back_some_keys_leaves_the_others_out() {
        let mut ctx = Context::default();
        let v = ctx
            .eval(Source::from_bytes(
                "({ payload: { big: [1, 2, 3] }, data: { n: 1, $kept: 2 }, context: { a: 'b', $flow: 'f' }, u: undefined })",
            ))
            .unwrap();
        let key = |name, without_meta| ReadKey { name, without_meta };
        let keys = |k: &[ReadKey], v: &JsValue, ctx: &mut Context| from_js_keys(v, k, ctx).unwrap();
        let some = [
            key("context", true),
            key("data", false),
            key("missing", false),
            key("u", false),
        ];
        assert_eq!(
            keys(&some, &v, &mut ctx),
            Some(json!({"context": {"a": "b"}, "data": {"n": 1, "$kept": 2}}))
        );
        assert_eq!(keys(&[], &v, &mut ctx), from_js(&v, &mut ctx).unwrap());
        let arr = to_js(&json!([{"context": 1}]), &mut ctx);
        let context = [key("context", true)];
        assert_eq!(
            keys(&context, &arr, &mut ctx),
            Some(json!([{"context": 1}]))
        );
        assert_eq!(keys(&context, &JsValue::new(3), &mut ctx), Some(json!(3)));
        let cyclic = ctx
            .eval(Source::from_bytes(
                "var c = { context: {} }; c.context.up = c; c",
            ))
            .unwrap();
        assert!(from_js_keys(&cyclic, &context, &mut ctx).is_err());
        let deeper = ctx
            .eval(Source::from_bytes(
                "var d = { context: { x: {} } }; d.context.x.up = d.context; d",
            ))
            .unwrap();
        assert!(from_js_keys(&deeper, &context, &mut ctx).is_err());
    }

    /// Objects we make have the shape of an object literal: JavaScript sees ordinary objects.
    #[test]
    fn converted_objects_behave_as_literals() {
        let mut ctx = Context::default();
        let v = to_js(&json!({"a": 1, "b": {"c": [1, 2]}}), &mut ctx);
        ctx.global_object()
            .set(JsString::from("v"), v, false, &mut ctx)
            .unwrap();
        let out = ctx
            .eval(Source::from_bytes(
                "v.a += 1; delete v.b.c; v.d = Object.keys(v).join(); \
                 [Object.getPrototypeOf(v) === Object.prototype, Array.isArray(v.b) , JSON.stringify(v)]",
            ))
            .unwrap();
        assert_eq!(
            from_js(&out, &mut ctx).unwrap(),
            Some(json!([true, false, r#"{"a":2,"b":{},"d":"a,b"}"#]))
        );
    }
}
