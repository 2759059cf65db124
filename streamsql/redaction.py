"""Keeping secrets out of what is shown, logged or kept: the marker that replaces them, the
names that hold one, and passwords inside URLs. Beneath every package that shows settings
(the Kafka client settings, the Schema Registry's URLs, the command log's properties, the
connectors' configurations), so each takes it from here rather than from another's module.
"""

from __future__ import annotations

import re

#: what is shown in place of a secret
HIDDEN = "[hidden]"

#: a property or connector key that looks like it holds a secret (the test that keeps secrets out
#: of SHOW PROPERTIES, the command log and a connector's description)
_SECRET = re.compile(r"password|secret|jaas|token|user\.info|credential|key\.pem|(?<!format)\.key$|private|"
                     r"access\.key|api\.key|keystore|truststore", re.IGNORECASE)

_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]*@", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """Whether a property (or a connector key) names a secret: its value is never shown or logged."""
    return _SECRET.search(name) is not None


def hide_url_password(text: str) -> str:
    """``https://user:secret@host`` → ``https://user:[hidden]@host`` wherever a URL in ``text``
    carries a password (a registry URL with its credentials, ksqlDB's ``URL`` credentials source)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{HIDDEN}@", text) if "@" in text else text
