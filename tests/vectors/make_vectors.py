#!/usr/bin/env python3
"""Interoperability vectors for apistore-value, independent of its Rust code.

Values are built with Python's `cryptography` (AES-GCM, AES-CBC) and PyNaCl
(secretbox) in kube-apiserver's exact stored layout:

    k8s:enc:aesgcm:v1:<key>:    nonce(12) | ciphertext | tag(16)   (AAD = etcd key)
    k8s:enc:aescbc:v1:<key>:    iv(16) | AES-CBC(plaintext | PKCS#7 padding)
    k8s:enc:secretbox:v1:<key>: nonce(24) | tag(16) | ciphertext   (NaCl secretbox)
    identity:                   the plaintext itself

Modes:
    make_vectors.py generate [OUT]   write kube_vectors.json (default: beside this file)
    make_vectors.py check FILE...    decrypt every vector of FILE (e.g. the
                                     rust_vectors.json the Rust tests write) and
                                     compare plaintext and staleness

A vector file is {"suites": [{"config": <EncryptionConfiguration as JSON>,
"vectors": [{"name", "resource", "etcd_key", "plaintext_b64", "stored_b64",
"stale"}]}]}. Generation is deterministic: nonces, IVs and keys are derived from
names with SHA-256, so regenerating gives the same file.

Requires: pip install cryptography pynacl
"""

import base64
import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
import nacl.secret

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIXES = {
    "aesgcm": b"k8s:enc:aesgcm:v1:",
    "aescbc": b"k8s:enc:aescbc:v1:",
    "secretbox": b"k8s:enc:secretbox:v1:",
}


def derived(label, size):
    """Deterministic bytes for a label."""
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{label}#{counter}".encode()).digest()
        counter += 1
    return out[:size]


def b64(data):
    return base64.b64encode(data).decode()


# --- ciphers, written from kube-apiserver's layouts --------------------------------


def gcm_seal(key, plaintext, aad, nonce):
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def gcm_open(key, data, aad):
    if len(data) < 12:
        raise ValueError("the stored data was shorter than the required size")
    return AESGCM(key).decrypt(data[:12], data[12:], aad)


def cbc_seal(key, plaintext, iv):
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return iv + enc.update(padded) + enc.finalize()


def cbc_open(key, data):
    if len(data) < 16:
        raise ValueError("the stored data was shorter than the required size")
    iv, body = data[:16], data[16:]
    if len(body) % 16 != 0:
        raise ValueError("the stored data is not a multiple of the block size")
    dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    plain = dec.update(body) + dec.finalize()
    if not plain or plain[-1] == 0 or plain[-1] > len(plain):
        raise ValueError("invalid PKCS7 data (empty or not padded)")
    pad = plain[-1]
    if plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("invalid padding on input")
    return plain[:-pad]


def secretbox_seal(key, plaintext, nonce):
    # PyNaCl returns nonce | tag | ciphertext: NaCl's layout, as Go's secretbox.Seal.
    return bytes(nacl.secret.SecretBox(key).encrypt(plaintext, nonce))


def secretbox_open(key, data):
    if len(data) < 40:
        raise ValueError("the stored data was shorter than the required size")
    return nacl.secret.SecretBox(key).decrypt(data[24:], data[:24])


def open_with(provider, key, data, aad):
    if provider == "aesgcm":
        return gcm_open(key, data, aad)
    if provider == "aescbc":
        return cbc_open(key, data)
    if provider == "secretbox":
        return secretbox_open(key, data)
    raise ValueError(f"unknown provider {provider}")


# --- configuration lookup and kube's prefix-list reading ---------------------------


def parse_group_resource(text):
    resource, dot, group = text.partition(".")
    return (group, resource) if dot else ("", text)


def providers_for(config, resource):
    """kube's lookup: own rule, then *.<group>, then *.*; providers concatenated."""
    lists = {}
    for entry in config["resources"]:
        for name in entry["resources"]:
            lists.setdefault(parse_group_resource(name), []).extend(entry["providers"])
    group, res = parse_group_resource(resource)
    for rule in ((group, res), (group, "*"), ("*", "*")):
        if rule in lists:
            return lists[rule]
    return None


def read(config, resource, stored, aad):
    """Returns (plaintext, stale) as kube-apiserver would read the value."""
    providers = providers_for(config, resource)
    if providers is None:
        if stored.startswith(b"k8s:enc:"):
            raise ValueError("identity transformer tried to read encrypted data")
        return stored, False
    errors = []
    for p_index, provider in enumerate(providers):
        (name, body), = provider.items()
        if name == "identity":
            if not stored.startswith(b"k8s:enc:"):
                return stored, p_index != 0
            continue
        prefix = PREFIXES[name]
        if not stored.startswith(prefix):
            continue
        rest = stored[len(prefix):]
        matched = False
        for k_index, key in enumerate(body["keys"]):
            key_prefix = key["name"].encode() + b":"
            if not rest.startswith(key_prefix):
                continue
            matched = True
            try:
                plain = open_with(name, base64.b64decode(key["secret"]), rest[len(key_prefix):], aad)
            except Exception as err:  # noqa: BLE001 - collected like kube does
                errors.append(f"{name}/{key['name']}: {err!r}")
                continue
            return plain, p_index != 0 or k_index != 0
        if not matched:
            errors.append(f"{name}: no matching key")
    raise ValueError("; ".join(errors) or "no matching prefix found")


# --- generation ----------------------------------------------------------------------


def key_entry(name, size):
    return {"name": name, "secret": b64(derived(f"key:{name}", size))}


def kube_config():
    return {
        "kind": "EncryptionConfiguration",
        "apiVersion": "apiserver.config.k8s.io/v1",
        "resources": [
            {
                "resources": ["secrets"],
                "providers": [
                    {"aesgcm": {"keys": [key_entry("gcm32", 32), key_entry("gcm16", 16), key_entry("gcm24", 24)]}},
                    {"aescbc": {"keys": [key_entry("cbc32", 32), key_entry("cbc16", 16), key_entry("cbc24", 24)]}},
                    {"secretbox": {"keys": [key_entry("box1", 32), key_entry("box2", 32)]}},
                    {"identity": {}},
                ],
            },
            {
                "resources": ["configmaps"],
                "providers": [
                    {"secretbox": {"keys": [key_entry("box1", 32)]}},
                    {"aesgcm": {"keys": [key_entry("gcm16", 16)]}},
                ],
            },
            {
                "resources": ["*.apps"],
                "providers": [
                    {"aescbc": {"keys": [key_entry("cbc16", 16)]}},
                    {"identity": {}},
                ],
            },
        ],
    }


def secret_of(config, resource, provider, key_name):
    for p in providers_for(config, resource):
        if provider in p:
            for key in p[provider]["keys"]:
                if key["name"] == key_name:
                    return base64.b64decode(key["secret"])
    raise KeyError(key_name)


PLAINTEXTS = {
    "empty": b"",
    "short": b"pandas are the best",
    "block": b"0123456789abcdef",
    "json": b'{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","namespace":"default"},"data":{"k":"dg=="}}',
    "large": bytes(range(256)) * 4,
}

# (resource, provider or None for identity, key name, stale when read back)
WRITES = [
    ("secrets", "aesgcm", "gcm32", False),
    ("secrets", "aesgcm", "gcm16", True),
    ("secrets", "aesgcm", "gcm24", True),
    ("secrets", "aescbc", "cbc32", True),
    ("secrets", "aescbc", "cbc16", True),
    ("secrets", "aescbc", "cbc24", True),
    ("secrets", "secretbox", "box1", True),
    ("secrets", "secretbox", "box2", True),
    ("secrets", None, None, True),
    ("configmaps", "secretbox", "box1", False),
    ("configmaps", "aesgcm", "gcm16", True),
    ("deployments.apps", "aescbc", "cbc16", False),
    ("deployments.apps", None, None, True),
    ("pods", None, None, False),
]


def seal(config, resource, provider, key_name, plaintext, etcd_key, label):
    if provider is None:
        return plaintext
    key = secret_of(config, resource, provider, key_name)
    prefix = PREFIXES[provider] + key_name.encode() + b":"
    if provider == "aesgcm":
        return prefix + gcm_seal(key, plaintext, etcd_key, derived(f"nonce:{label}", 12))
    if provider == "aescbc":
        return prefix + cbc_seal(key, plaintext, derived(f"iv:{label}", 16))
    return prefix + secretbox_seal(key, plaintext, derived(f"nonce:{label}", 24))


def generate(out):
    config = kube_config()
    vectors = []
    for resource, provider, key_name, stale in WRITES:
        group, res = parse_group_resource(resource)
        for text_name, plaintext in PLAINTEXTS.items():
            name = f"{resource}/{provider or 'identity'}/{key_name or '-'}/{text_name}"
            etcd_key = f"/registry/{res}/default/{text_name}".encode()
            if group:
                etcd_key = f"/registry/{group}/{res}/default/{text_name}".encode()
            stored = seal(config, resource, provider, key_name, plaintext, etcd_key, name)
            vectors.append({
                "name": name,
                "resource": resource,
                "etcd_key": etcd_key.decode(),
                "plaintext_b64": b64(plaintext),
                "stored_b64": b64(stored),
                "stale": stale,
            })
    doc = {
        "generator": "tests/vectors/make_vectors.py generate (Python cryptography + PyNaCl)",
        "suites": [{"config": config, "vectors": vectors}],
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    failures = check_doc(doc)
    print(f"wrote {len(vectors)} vectors to {out}; self-check failures: {failures}")
    return 1 if failures else 0


# --- checking --------------------------------------------------------------------------


def check_kube_recorded():
    """Anchors this script's GCM layout to a value kube-apiserver itself wrote (the
    vector of kube's TestGCMLegacyDataCompatibility)."""
    stored = bytes.fromhex(
        "9f27c8fcea8a58c467d8e437dbf2d85955f9b4bd912f4ef967d788a0cb07797dac0a3f0a0845605ca85ac8562b4ae1"
    )
    if gcm_open(b"snorlax_awesomes", stored, b"bamboo") != b"pandas are the best":
        raise SystemExit("kube's recorded AES-GCM vector did not decrypt")


def check_doc(doc):
    check_kube_recorded()
    failures = 0
    total = 0
    for suite in doc["suites"]:
        config = suite["config"]
        for v in suite["vectors"]:
            total += 1
            stored = base64.b64decode(v["stored_b64"])
            want = base64.b64decode(v["plaintext_b64"])
            try:
                got, stale = read(config, v["resource"], stored, v["etcd_key"].encode())
            except Exception as err:  # noqa: BLE001
                print(f"FAIL {v['name']}: {err}")
                failures += 1
                continue
            if got != want or stale != v["stale"]:
                print(f"FAIL {v['name']}: plaintext match={got == want} stale={stale} want {v['stale']}")
                failures += 1
    print(f"checked {total} vectors: {total - failures} passed, {failures} failed")
    return failures


def check(paths):
    failures = 0
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        print(f"{path}: generator: {doc.get('generator', '?')}")
        failures += check_doc(doc)
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "generate":
        return generate(argv[2] if len(argv) > 2 else os.path.join(HERE, "kube_vectors.json"))
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
