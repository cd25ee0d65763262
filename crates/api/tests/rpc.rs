//! Calling operations by name (`rewind_api::rpc`, what JSON-RPC dispatches through): every
//! operation of `OPERATIONS` has its method, and nothing else does.

use rewind_api::{rpc, Context, ErrorKind, Service, OPERATIONS};
use serde_json::json;

#[test]
fn every_operation_is_called_by_its_method_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::new(Context::new(dir.path(), "S").unwrap());
    for op in OPERATIONS {
        // A field no request has: refused as invalid params before anything is opened.
        let out = rpc::call(&svc, op.method, json!({"no_such_field": 1}));
        let err = out
            .unwrap_or_else(|| panic!("{} is not dispatched", op.method))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Usage, "{}: {err:?}", op.method);
        assert!(
            err.message.contains("no_such_field"),
            "{}: {err:?}",
            op.method
        );
    }
    for other in ["", "epoch_begin", "Status", "subscribe", "status "] {
        assert!(rpc::call(&svc, other, json!({})).is_none(), "{other:?}");
    }
}
