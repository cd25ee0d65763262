//! JSON-RPC 2.0 framing: one JSON value per line, a request or a batch (an array of them);
//! what goes wrong before a method runs is answered with the specification's codes.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

/// The largest message read, in bytes: a longer line is answered with an error and skipped.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a request object.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Parameters that do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;

/// One request of a message.
#[derive(Debug)]
pub struct Request {
    /// Absent: a notification, which gets no response.
    pub id: Option<Value>,
    /// The method name.
    pub method: String,
    /// The parameters, `null` when absent; always an object otherwise.
    pub params: Value,
}

/// A message's requests, or the error response it gets as a whole.
pub enum Message {
    /// One request.
    One(Result<Request, Value>),
    /// A batch: each item a request or its error response.
    Batch(Vec<Result<Request, Value>>),
}

/// Reads one line of input.
pub fn parse(line: &[u8]) -> Result<Message, Value> {
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| error(Value::Null, PARSE_ERROR, &format!("parse error: {e}"), None))?;
    match v {
        Value::Array(items) if items.is_empty() => Err(error(
            Value::Null,
            INVALID_REQUEST,
            "invalid request: an empty batch",
            None,
        )),
        Value::Array(items) => Ok(Message::Batch(items.into_iter().map(request).collect())),
        v => Ok(Message::One(request(v))),
    }
}

fn request(v: Value) -> Result<Request, Value> {
    let Value::Object(mut o) = v else {
        return Err(invalid(Value::Null, "a request is a JSON object"));
    };
    let id = o.remove("id");
    let reply_id = id.clone().unwrap_or(Value::Null);
    if !matches!(
        id,
        None | Some(Value::Null | Value::String(_) | Value::Number(_))
    ) {
        return Err(invalid(Value::Null, "\"id\" must be a string or a number"));
    }
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid(reply_id, "\"jsonrpc\" must be \"2.0\""));
    }
    let Some(Value::String(method)) = o.remove("method") else {
        return Err(invalid(reply_id, "\"method\" must be a string"));
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => Value::Null,
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(error(
                reply_id,
                INVALID_PARAMS,
                "invalid params: give them by name, as an object",
                None,
            ))
        }
    };
    Ok(Request { id, method, params })
}

fn invalid(id: Value, why: &str) -> Value {
    error(
        id,
        INVALID_REQUEST,
        &format!("invalid request: {why}"),
        None,
    )
}

/// A success response, around a result already encoded.
pub fn result(id: &Value, result: &RawValue) -> Box<RawValue> {
    #[derive(Serialize)]
    struct Success<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a RawValue,
    }
    let success = Success {
        jsonrpc: "2.0",
        id,
        result,
    };
    serde_json::value::to_raw_value(&success).expect("JSON values and text encode")
}

/// A message built as a [`Value`], as text.
pub fn text(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("JSON values encode")
}

/// An error response.
pub fn error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = Map::new();
    e.insert("code".into(), json!(code));
    e.insert("message".into(), json!(message));
    if let Some(d) = data {
        e.insert("data".into(), d);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// A notification from the server.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}
