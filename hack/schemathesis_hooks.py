# Schemathesis hooks for hack/schemathesis.mjs (loaded through SCHEMATHESIS_HOOKS).
#
# BT-IDEMPOTENCY-KEY: a client sends a fresh key with each new request and the same one only with a retry of it.
# Generated keys repeat ("0" again and again), so a create sent twice with one key and one body is answered the first
# time's resource, as a retry is (docs/api.md, "Idempotency"); when a step in between deleted that resource, the
# stateful checks saw a 404 right after a create. The key of each positive case gets a unique suffix, so the run does
# what clients do; replays are tested in the integration tier. Negative cases are sent as generated: their header may
# be the invalid part, and changing a case makes Schemathesis judge it again (a missing BT-API-KEY would come back).
import uuid

import schemathesis

HEADER = "bt-idempotency-key"
SUFFIX_LENGTH = 37  # "-" and a UUID; the key stays within its 255 characters


@schemathesis.hook
def before_call(context, case, kwargs):
    meta = case.meta
    if meta is None or meta.generation.mode.is_negative or not case.headers:
        return
    for name, value in list(case.headers.items()):
        if name.lower() == HEADER and isinstance(value, str) and 1 <= len(value) <= 255 - SUFFIX_LENGTH:
            case.headers[name] = f"{value}-{uuid.uuid4()}"
