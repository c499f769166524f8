"""The vendor presets' layouts in logetl's own notation, and what the parse does with their fields beyond
splitting them (URL-decoding, shape checks, lines that are not requests): tables that ``logetl.formats``
compiles into programs for the kernel."""

from __future__ import annotations

import re

#: the vendor presets, written in logetl's own notation: ``{name}`` a field (its kind follows from the text
#: around it, as in a format string), ``{name:KIND}`` a field of a preset kind (``qor`` quoted or bare,
#: ``maybe`` optional in braces, ``prefix`` an optional syslog prefix), ``{port:port}`` a port (so the
#: address before it is split at its last ':'), ``{?}`` a place where an older layout ends the line, and
#: ``\t`` a TAB. Field names follow the one vocabulary: ip, time, request, response, size, referer,
#: user_agent, method, path, query where the vendor writes them.
VENDOR = {
    "alb": "{type} {time} {elb} {ip}:{client_port:port} {target} {request_processing_time} "
           "{target_processing_time} {response_processing_time} {response} {target_status_code} "
           '{received_bytes} {size} "{request}" "{user_agent}" {ssl_cipher} {ssl_protocol} {target_group_arn} '
           '"{trace_id}"{?} "{domain_name}"{?} "{chosen_cert_arn}"{?} {matched_rule_priority}{?} '
           '{request_creation_time}{?} "{actions_executed}"{?} "{redirect_url}"{?} "{error_reason}"{?} '
           '"{target_port_list}"{?} "{target_status_code_list}"{?} "{classification}"{?} '
           '"{classification_reason}"{?} {conn_trace_id}{?} "{transformed_host}"{?} "{transformed_uri}"{?} '
           '"{request_transform_status}"{?} {extra}',
    "elb": "{time} {elb} {ip}:{client_port:port} {backend} {request_processing_time} {backend_processing_time} "
           "{response_processing_time} {response} {backend_status_code} {received_bytes} {size} "
           '"{request}"{?} "{user_agent}" {ssl_cipher} {ssl_protocol}',
    "s3": "{bucket_owner} {bucket} [{time}] {ip} {requester} {request_id} {operation} {key} {request:qor} "
          "{response} {error_code} {size} {object_size} {total_time} {turn_around_time} {referer:qor} "
          "{user_agent:qor}{?} {version_id}{?} {host_id}{?} {signature_version}{?} {cipher_suite}{?} "
          "{authentication_type}{?} {host_header}{?} {tls_version}{?} {access_point_arn}{?} {acl_required}{?} "
          "{extra}",
    "haproxy": "{syslog:prefix}{ip}:{client_port:port} [{time}] {frontend} {backend}/{server} "
               "{time_request}/{time_queue}/{time_connect}/{time_response}/{time_active} {response} {size} "
               "{request_cookie} {response_cookie} {termination_state} "
               "{actconn}/{feconn}/{beconn}/{srv_conn}/{retries} {srv_queue}/{backend_queue} "
               '{request_headers:maybe}{response_headers:maybe}"{request}"',
    "cloudfront": "{date}\t{time}\t{edge_location}\t{size}\t{ip}\t{method}\t{host}\t{path}\t{response}\t"
                  "{referer}\t{user_agent}\t{query}{?}\t{cookie}{?}\t{edge_result_type}{?}\t{edge_request_id}{?}\t"
                  "{host_header}{?}\t{protocol}{?}\t{request_bytes}{?}\t{time_taken}{?}\t{forwarded_for}{?}\t"
                  "{ssl_protocol}{?}\t{ssl_cipher}{?}\t{edge_response_result_type}{?}\t{protocol_version}{?}\t"
                  "{fle_status}{?}\t{fle_encrypted_fields}{?}\t{client_port}{?}\t{time_to_first_byte}{?}\t"
                  "{edge_detailed_result_type}{?}\t{content_type}{?}\t{content_length}{?}\t{range_start}{?}\t"
                  "{range_end}",
}
#: the JSON-lines presets (logetl.jsonformats)
JSON_NAMES = ("caddy", "traefik", "nginx_json")
#: the vendor presets whose lines may be header lines, and how those start
VENDOR_HEADERS = {"cloudfront": "#"}
#: the vendor presets' fields written URL-encoded, percent-decoded by the parse (``LogFormat.decode``):
#: CloudFront encodes every value's spaces, control and non-ASCII bytes and ``<>"#%{}|\^~[]`'``; these are
#: its fields that can hold such characters (the others are numbers, addresses, codes and names)
VENDOR_DECODE = {"cloudfront": ("path", "referer", "user_agent", "query", "cookie", "host_header",
                                "forwarded_for", "content_type")}
#: the shapes of the vendor presets' fields (``LogFormat.shapes``): ``n`` a number (an optional sign, then
#: digits), ``w`` a word (no space). HAProxy's HTTP log format: its timers, status, bytes, connection counts
#: and queues are numbers, and the backend before ``/`` a word, so that a line of a custom ``log-format``
#: (another field before the timers, the frontend placed elsewhere) does not match instead of giving fields
#: that are other ones; the same in its TCP layout (``VENDOR_OTHERS``), so that such a line is malformed,
#: not counted apart as a line that is not a request
VENDOR_SHAPES = {"haproxy": (("backend", "w"), *((f, "n") for f in (
    "time_request", "time_queue", "time_connect", "time_response", "time_active", "time_total", "response", "size",
    "actconn", "feconn", "beconn", "srv_conn", "retries", "srv_queue", "backend_queue")))}
SHAPES = {"n": (re.compile(rb"[-+]?[0-9]+"), "not a number"), "w": (re.compile(rb"[^ ]*"), "a space in it")}
#: an escape ``decode`` decodes: ``%`` and two hex digits of a byte that is not a control character (as
#: ``url_decode``: ``logetl.expressions.DECODED_ESCAPE``); any other ``%`` stays as written
ESCAPE = re.compile(rb"%([2-6][0-9A-Fa-f]|7[0-9A-Ea-e]|[89A-Fa-f][0-9A-Fa-f])")


def percent_decode(value: bytes) -> bytes:
    """``value`` with its escapes decoded (``ESCAPE``; ``+`` is itself): the kernel's ``pct_decode``."""
    return ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), value) if b"%" in value else value
#: how HAProxy's own messages start (after the syslog prefix, when there is one): its notices and alerts
#: (``Proxy http-in started.``, ``Server static/srv1 is DOWN, reason: ...``, ``backend static has no server
#: available!``, ``Health check for server ...``), the connection lines of a proxy without a log format
#: (``Connect from 10.0.1.2:33312 to 10.0.3.31:8012 (www/HTTP)``), and its messages as written on standard
#: error (``[WARNING]  (1) : ...``)
HAPROXY_NOTICES = ("Proxy ", "Server ", "Backup Server ", "backend ", "Health check for ", "Agent check for ",
                   "Pausing ", "Resuming ", "Stopping ", "Connect from ", "[NOTICE] ", "[WARNING] ", "[ALERT] ")
#: the vendor presets' lines that are not requests (counted apart as ``non_http_lines``, neither records nor
#: malformed), as layouts of their own: HAProxy's TCP-mode lines (``option tcplog``) and its notices
VENDOR_OTHERS = {
    "haproxy": ("{syslog:prefix}{ip}:{client_port:port} [{time}] {frontend} {backend}/{server} "
                "{time_queue}/{time_connect}/{time_total} {size} {termination_state} "
                "{actconn}/{feconn}/{beconn}/{srv_conn}/{retries} {srv_queue}/{backend_queue}",
                *(f"{{syslog:prefix}}{start}{{message}}" for start in HAPROXY_NOTICES),
                *(f"{start}{{message}}" for start in HAPROXY_NOTICES)),
}
