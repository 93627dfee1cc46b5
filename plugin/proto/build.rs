//! Compiles `proto/graph_ascend.proto` with protox (pure Rust, no `protoc` needed), keeps the
//! FileDescriptorSet, which the binary hands to the Python shim (`graph-ascend proto-descriptor`),
//! and generates from its descriptor, with its options:
//!
//! - the browser's JSON of every answer (`browser_json.rs`, below; see `src/json.rs`);
//! - the sidecar's RPC wrappers (`rpc_service.rs`, `build/rpc.rs`; see `src/rpc.rs`);
//! - the page's answer and request types and route table (`page_proto.ts`, `build/page_ts.rs`),
//!   committed as `frontend/src/generated/proto.ts` (`tests/generated_ts.rs` keeps it current).
#[path = "build/page_ts.rs"]
mod page_ts;
#[path = "build/rpc.rs"]
mod rpc;

use std::fmt::Write as _;
use std::path::PathBuf;

use prost_reflect::{
    Cardinality, DescriptorPool, ExtensionDescriptor, FieldDescriptor, Kind, MessageDescriptor,
    ServiceDescriptor, Value,
};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("graph_ascend.proto");
    // Relative to the package (as Cargo reads it), not absolute: a checkout elsewhere sharing the same
    // CARGO_TARGET_DIR (tests/wheel's `make install` test) must not rebuild everything after this crate.
    println!("cargo:rerun-if-changed=../../proto/graph_ascend.proto");
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true);
    compiler.open_file(&file)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // Encoded by protox itself: prost's descriptor types would drop the custom options
    // (`http`, `json_map_key`, ...) that the shim and the JSON generator read.
    std::fs::write(
        out.join("graph_ascend_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    let pool = compiler.descriptor_pool();
    std::fs::write(out.join("browser_json.rs"), browser_json(&pool)?)?;
    std::fs::write(out.join("rpc_service.rs"), rpc::service_macro(&pool)?)?;
    std::fs::write(out.join("page_proto.ts"), page_ts::page_proto(&pool)?)?;
    let fds = compiler.file_descriptor_set();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

const PACKAGE: &str = "graph_ascend.v1";
const SERVICE: &str = "graph_ascend.v1.GraphAscend";

/// The custom options of the proto (see its "Options").
struct Options {
    http: ExtensionDescriptor,
    blocking: ExtensionDescriptor,
    heavy: ExtensionDescriptor,
    map_key: ExtensionDescriptor,
    map_value: ExtensionDescriptor,
    json_null: ExtensionDescriptor,
}

impl Options {
    fn of(pool: &DescriptorPool) -> Result<Options, BoxError> {
        let ext = |name: &str| {
            pool.get_extension_by_name(&format!("{PACKAGE}.{name}"))
                .ok_or_else(|| format!("the proto lacks the option {name}"))
        };
        Ok(Options {
            http: ext("http")?,
            blocking: ext("blocking")?,
            heavy: ext("heavy")?,
            map_key: ext("json_map_key")?,
            map_value: ext("json_map_value")?,
            json_null: ext("json_null")?,
        })
    }

    fn string(&self, field: &FieldDescriptor, ext: &ExtensionDescriptor) -> Option<String> {
        match field.options().get_extension(ext).as_ref() {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        }
    }

    fn json_null(&self, field: &FieldDescriptor) -> bool {
        matches!(
            field.options().get_extension(&self.json_null).as_ref(),
            Value::Bool(true)
        )
    }

    /// The RPCs with a browser route whose answer is JSON (`download` routes answer bytes, which
    /// the shim passes on without `CallJson`).
    fn routed(&self, service: &ServiceDescriptor) -> Vec<prost_reflect::MethodDescriptor> {
        service
            .methods()
            .filter(|m| m.options().has_extension(&self.http) && !self.download(m))
            .collect()
    }

    fn download(&self, method: &prost_reflect::MethodDescriptor) -> bool {
        self.route_flag(method, "download")
    }

    /// A `bool` field of a method's `http` option (`sse`, `write`, `download`).
    fn route_flag(&self, method: &prost_reflect::MethodDescriptor, flag: &str) -> bool {
        match method.options().get_extension(&self.http).as_ref() {
            Value::Message(route) => route
                .get_field_by_name(flag)
                .is_some_and(|v| matches!(v.as_ref(), Value::Bool(true))),
            _ => false,
        }
    }

    /// The route names of a method's `http` option (empty: no route).
    fn route_paths(&self, method: &prost_reflect::MethodDescriptor) -> Vec<String> {
        match method.options().get_extension(&self.http).as_ref() {
            Value::Message(route) => match route.get_field_by_name("paths").as_deref() {
                Some(Value::List(paths)) => paths
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Whether a method carries `option (blocking) = true`.
    fn blocking(&self, method: &prost_reflect::MethodDescriptor) -> bool {
        Self::flag(method, &self.blocking)
    }

    /// Whether a method carries `option (heavy) = true`.
    fn heavy(&self, method: &prost_reflect::MethodDescriptor) -> bool {
        Self::flag(method, &self.heavy)
    }

    fn flag(method: &prost_reflect::MethodDescriptor, ext: &ExtensionDescriptor) -> bool {
        matches!(
            method.options().get_extension(ext).as_ref(),
            Value::Bool(true)
        )
    }
}

/// The generated module: one `Fields` impl per message a routed RPC can answer with, one
/// wrapper per object-rendered (`json_map_key`) field, and the dispatch of `CallJson` and
/// `StreamJson` to the routed RPCs.
fn browser_json(pool: &DescriptorPool) -> Result<String, BoxError> {
    let opts = Options::of(pool)?;
    let service = pool
        .get_service_by_name(SERVICE)
        .ok_or_else(|| format!("the proto has no service {SERVICE}"))?;
    let routed = opts.routed(&service);
    // Every message type an answer can contain, in a stable order.
    let seen = reachable(routed.iter().map(|m| m.output()));

    let mut code =
        String::from("// Generated by plugin/proto/build.rs from proto/graph_ascend.proto.\n");
    for msg in &seen {
        message_fields(&mut code, &opts, msg)?;
    }
    dispatch(&mut code, &routed)?;
    Ok(code)
}

/// Every message `roots` can contain (well-known types aside), sorted by name.
fn reachable(roots: impl Iterator<Item = MessageDescriptor>) -> Vec<MessageDescriptor> {
    let mut todo: Vec<MessageDescriptor> = roots.collect();
    let mut seen: Vec<MessageDescriptor> = Vec::new();
    while let Some(msg) = todo.pop() {
        if seen.contains(&msg) || well_known(&msg).is_some() {
            continue;
        }
        for field in msg.fields() {
            if let Kind::Message(m) = field.kind() {
                todo.push(m);
            }
        }
        seen.push(msg);
    }
    seen.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    seen
}

/// The writer (in `src/json/write.rs`) of a well-known type, if it is one.
fn well_known(msg: &MessageDescriptor) -> Option<&'static str> {
    match msg.full_name() {
        "google.protobuf.Struct" => Some("struct_value"),
        "google.protobuf.Value" => Some("value"),
        "google.protobuf.ListValue" => Some("list_value"),
        _ => None,
    }
}

/// The Rust path of a message's generated type.
fn rust_type(msg: &MessageDescriptor) -> Result<String, BoxError> {
    if msg.package_name() != PACKAGE || msg.parent_message().is_some() {
        return Err(format!(
            "{}: only top-level messages of {PACKAGE} are supported",
            msg.full_name()
        )
        .into());
    }
    Ok(format!("crate::v1::{}", msg.name()))
}

/// prost's name of a field (`type` becomes `r#type`).
fn rust_field(field: &FieldDescriptor) -> String {
    const RAW: &[&str] = &[
        "type", "match", "move", "ref", "fn", "loop", "mod", "use", "impl", "where",
    ];
    if RAW.contains(&field.name()) {
        format!("r#{}", field.name())
    } else {
        field.name().to_owned()
    }
}

/// The statement that appends `value`, a reference to one (not repeated) value of `field`, to
/// `out`.
fn one_value(field: &FieldDescriptor, value: &str) -> Result<String, BoxError> {
    // Scalars are passed by value: `&self.x` becomes `self.x`, `v` becomes `*v`.
    let copied = match value.strip_prefix('&') {
        Some(place) => place.to_owned(),
        None => format!("*{value}"),
    };
    Ok(match field.kind() {
        Kind::String => format!("crate::json::write::string(out, {value});"),
        Kind::Bool => format!("crate::json::write::boolean(out, {copied});"),
        Kind::Int32 => format!("crate::json::write::int(out, {copied});"),
        Kind::Double => format!("crate::json::write::double(out, {copied});"),
        Kind::Message(m) => match well_known(&m) {
            Some(writer) => format!("crate::json::write::{writer}(out, {value});"),
            None => format!("crate::json::write_object(out, {value}, 0);"),
        },
        other => {
            return Err(format!(
                "{}: the browser JSON does not support fields of type {other:?} yet (plugin/proto/build.rs)",
                field.full_name()
            )
            .into())
        }
    })
}

/// The statement that appends the whole of `field` of `owner` (a reference to its message) to
/// `out`, for a field that is present (`Option` fields: `Some`).
fn field_value(opts: &Options, field: &FieldDescriptor, owner: &str) -> Result<String, BoxError> {
    let access = format!("{owner}.{}", rust_field(field));
    if field.is_map() || field.containing_oneof().is_some() {
        return Err(format!(
            "{}: maps and oneofs are not supported in answers",
            field.full_name()
        )
        .into());
    }
    if field.cardinality() == Cardinality::Repeated {
        if opts.string(field, &opts.map_key).is_some() {
            return Ok(format!("{}(out, &{access});", keyed_writer(field)));
        }
        if field.kind() == Kind::String {
            return Ok(format!("crate::json::write::strings(out, &{access});"));
        }
        if let Kind::Message(m) = field.kind() {
            if well_known(&m).is_some() {
                return Err(format!(
                    "{}: repeated well-known types are not supported in answers",
                    field.full_name()
                )
                .into());
            }
        }
        return Ok(format!(
            "crate::json::write::array(out, &{access}, |out, v| {{ {} }});",
            one_value(field, "v")?
        ));
    }
    one_value(field, &format!("&{access}"))
}

/// A field's JSON key with its colon, as a Rust byte string literal. JSON names are checked to
/// be plain identifiers, which need no escaping in JSON or in Rust.
fn key_literal(field: &FieldDescriptor) -> Result<String, BoxError> {
    let key = field.json_name();
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!(
            "{}: JSON name {key:?} is not a plain identifier (plugin/proto/build.rs writes keys unescaped)",
            field.full_name()
        )
        .into());
    }
    Ok(format!("b\"\\\"{key}\\\":\""))
}

/// `impl Fields` for one message, and the writers of its object-rendered fields.
fn message_fields(
    code: &mut String,
    opts: &Options,
    msg: &MessageDescriptor,
) -> Result<(), BoxError> {
    let ty = rust_type(msg)?;
    let mut writers = String::new();
    writeln!(code, "impl crate::json::Fields for {ty} {{")?;
    writeln!(
        code,
        "    fn write_fields(&self, out: &mut Vec<u8>, skip: u32) {{"
    )?;
    writeln!(code, "        let first = &mut true;")?;
    for field in msg.fields() {
        let key = format!(
            "crate::json::write::key(out, first, {});",
            key_literal(&field)?
        );
        let number = field.number();
        let name = rust_field(&field);
        if field.supports_presence() {
            let value = one_value(&field, "v")?;
            let absent = if opts.json_null(&field) {
                format!(" else {{ {key} crate::json::write::null(out); }}")
            } else {
                String::new()
            };
            writeln!(code, "        if skip != {number} {{ if let Some(v) = &self.{name} {{ {key} {value} }}{absent} }}")?;
        } else {
            let value = field_value(opts, &field, "self")?;
            writeln!(code, "        if skip != {number} {{ {key} {value} }}")?;
        }
        if let Some(map_key) = opts.string(&field, &opts.map_key) {
            keyed_field(&mut writers, opts, &field, &map_key)?;
        }
    }
    writeln!(code, "        let _ = first;\n    }}\n}}")?;
    code.push_str(&writers);
    Ok(())
}

/// The name of the generated writer of an object-rendered field.
fn keyed_writer(field: &FieldDescriptor) -> String {
    format!("write_{}_{}", field.parent_message().name(), field.name())
}

/// A repeated message field written as an object (`json_map_key`): its entry message, the entry's
/// key field (a single string), and the `json_map_value` field written as the value, if any.
/// The one check of these options, for the JSON writer and the page's types alike.
pub(crate) struct KeyedEntry {
    pub entry: MessageDescriptor,
    pub key: FieldDescriptor,
    pub value: Option<FieldDescriptor>,
}

pub(crate) fn keyed_entry(
    opts: &Options,
    field: &FieldDescriptor,
    map_key: &str,
) -> Result<KeyedEntry, BoxError> {
    let Kind::Message(entry) = field.kind() else {
        return Err(format!(
            "{}: json_map_key on a field that is not a message",
            field.full_name()
        )
        .into());
    };
    let key = entry
        .get_field_by_name(map_key)
        .filter(|f| f.kind() == Kind::String && f.cardinality() != Cardinality::Repeated)
        .ok_or_else(|| {
            format!(
                "{}: json_map_key {map_key:?} is not a string field of {}",
                field.full_name(),
                entry.full_name()
            )
        })?;
    let value = match opts.string(field, &opts.map_value) {
        Some(name) => Some(entry.get_field_by_name(&name).ok_or_else(|| {
            format!(
                "{}: json_map_value {name:?} is not a field of {}",
                field.full_name(),
                entry.full_name()
            )
        })?),
        None => None,
    };
    Ok(KeyedEntry { entry, key, value })
}

/// The writer of a repeated message field rendered as an object: `{entry.key: value}` where
/// the value is the entry's `json_map_value` field, or the entry without its key field.
fn keyed_field(
    code: &mut String,
    opts: &Options,
    field: &FieldDescriptor,
    map_key: &str,
) -> Result<(), BoxError> {
    let KeyedEntry {
        entry,
        key: key_field,
        value: value_field,
    } = keyed_entry(opts, field, map_key)?;
    let entry_ty = rust_type(&entry)?;
    let value = match value_field {
        Some(value_field) => {
            if value_field.supports_presence() {
                // An unset value is rendered as null.
                format!(
                    "match &e.{} {{ Some(v) => {{ {} }} None => crate::json::write::null(out) }}",
                    rust_field(&value_field),
                    one_value(&value_field, "v")?
                )
            } else {
                field_value(opts, &value_field, "e")?
            }
        }
        None => format!("crate::json::write_object(out, e, {});", key_field.number()),
    };
    let writer = keyed_writer(field);
    writeln!(
        code,
        "#[allow(non_snake_case)]\nfn {writer}(out: &mut Vec<u8>, entries: &[{entry_ty}]) {{"
    )?;
    writeln!(code, "    out.push(b'{{');")?;
    writeln!(code, "    for (i, e) in entries.iter().enumerate() {{")?;
    writeln!(code, "        if i > 0 {{ out.push(b','); }}")?;
    writeln!(
        code,
        "        crate::json::write::string(out, &e.{});",
        rust_field(&key_field)
    )?;
    writeln!(code, "        out.push(b':');")?;
    writeln!(code, "        {value}")?;
    writeln!(code, "    }}")?;
    writeln!(code, "    out.push(b'}}');\n}}")?;
    Ok(())
}

/// `tonic`'s method name: `LoadMetaDir` → `load_meta_dir`.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `call` and `stream`: a routed RPC named in a `JsonCall`, answered as JSON.
fn dispatch(code: &mut String, routed: &[prost_reflect::MethodDescriptor]) -> Result<(), BoxError> {
    let arm = |m: &prost_reflect::MethodDescriptor| -> Result<String, BoxError> {
        Ok(format!(
            "        {name:?} => {{\n            let request = crate::json::decode::<{req}>({name:?}, &call.request)?;\n            let answer = service.{method}(tonic::Request::new(request)).await?.into_inner();\n",
            name = m.name(),
            req = rust_type(&m.input())?,
            method = snake(m.name()),
        ))
    };
    writeln!(
        code,
        "/// Calls the unary RPC `call.method` of `service` and renders its answer as JSON."
    )?;
    writeln!(code, "pub async fn call<S: crate::graph_ascend_server::GraphAscend + crate::json::RenderAside>(service: &S, call: crate::v1::JsonCall) -> Result<crate::v1::JsonAnswer, tonic::Status> {{")?;
    writeln!(code, "    match call.method.as_str() {{")?;
    for m in routed.iter().filter(|m| !m.is_server_streaming()) {
        code.push_str(&arm(m)?);
        writeln!(
            code,
            "            crate::json::rendered(service, answer).await\n        }}"
        )?;
    }
    writeln!(
        code,
        "        other => Err(crate::json::unknown(other)),\n    }}\n}}"
    )?;
    writeln!(code, "/// Calls the server-streaming RPC `call.method` of `service`; each message rendered as JSON.")?;
    writeln!(code, "pub async fn stream<S: crate::graph_ascend_server::GraphAscend>(service: &S, call: crate::v1::JsonCall) -> Result<crate::json::JsonStream, tonic::Status> {{")?;
    writeln!(code, "    match call.method.as_str() {{")?;
    for m in routed.iter().filter(|m| m.is_server_streaming()) {
        code.push_str(&arm(m)?);
        writeln!(
            code,
            "            Ok(crate::json::answers(answer))\n        }}"
        )?;
    }
    writeln!(
        code,
        "        other => Err(crate::json::unknown(other)),\n    }}\n}}"
    )?;
    Ok(())
}
