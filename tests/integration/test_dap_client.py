"""The DAP client's framing (dap_client.encode / Decoder), without an adapter."""
import json

import pytest

from dap_client import DapError, Decoder, encode


def test_encode_is_content_length_then_json():
    data = encode({"seq": 1, "type": "request", "command": "initialize"})
    head, body = data.split(b"\r\n\r\n", 1)
    assert head == b"Content-Length: %d" % len(body)
    assert json.loads(body) == {"seq": 1, "type": "request", "command": "initialize"}


def test_decoder_takes_messages_split_anywhere_and_back_to_back():
    msgs = [{"type": "event", "event": "output", "body": {"output": "h\u00e9llo\n"}},
            {"type": "response", "request_seq": 2, "success": True}]
    stream = b"".join(encode(m) for m in msgs)
    for cut in range(1, len(stream)):
        dec = Decoder()
        got = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert got == msgs, cut
    # a byte at a time
    dec = Decoder()
    got = []
    for i in range(len(stream)):
        got += dec.feed(stream[i:i + 1])
    assert got == msgs


def test_decoder_reads_other_headers_and_any_case():
    body = b'{"type":"event","event":"initialized"}'
    data = b"content-length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body) + body
    assert Decoder().feed(data) == [{"type": "event", "event": "initialized"}]


def test_decoder_refuses_a_header_without_length():
    with pytest.raises(DapError):
        Decoder().feed(b"Content-Type: x\r\n\r\n{}")
