//! The realistic Pod every Pod workload stores: what a cluster holds (two containers
//! with resources, probes, env and mounts; status with conditions and container
//! statuses), about 4 KiB of JSON and 2.7 KiB of kube protobuf. Its own file, free of
//! the harness, so the decode tool (src/bin/decode.rs) builds the same Pods.

use serde_json::{Value, json};

/// What every Pod's name starts with: its ReplicaSet's name and a dash.
pub(crate) const POD_NAME_PREFIX: &str = "api-7c9d8b6f5-";

/// The name of the `i`th Pod (`api-7c9d8b6f5-00042`), five digits after the prefix.
pub(crate) fn pod_name(i: u64) -> String {
    format!("{POD_NAME_PREFIX}{i:05}")
}

/// A realistic Pod, the `i`th of a ReplicaSet's.
pub(crate) fn pod(i: u64) -> Value {
    let container = |name: &str, image: &str, port: u16| {
        json!({
            "name": name,
            "image": image,
            "args": [format!("--port={port}"), "--log-level=info"],
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "env": [
                {"name": "LOG_FORMAT", "value": "json"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "MEM_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
            ],
            "resources": {
                "limits": {"cpu": "1", "memory": "512Mi"},
                "requests": {"cpu": "250m", "memory": "64Mi"}
            },
            "volumeMounts": [
                {"name": "config", "readOnly": true, "mountPath": format!("/etc/{name}")},
                {"name": "kube-api-access", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
            ],
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"},
                "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10,
                "successThreshold": 1, "failureThreshold": 3
            },
            "readinessProbe": {
                "httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"
        })
    };
    let container_status = |name: &str, image: &str| {
        json!({
            "name": name,
            "state": {"running": {"startedAt": "2024-09-12T08:31:02Z"}},
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": image,
            "imageID": format!("{image}@sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"),
            "containerID": format!("containerd://{i:016x}{name}"),
            "started": true
        })
    };
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-09-12T08:31:02Z"});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(i),
            "generateName": "api-7c9d8b6f5-",
            "namespace": "prod",
            "uid": format!("5f2b1c9e-3a4d-4e8f-9b1a-{i:012x}"),
            "creationTimestamp": "2024-09-12T08:30:15Z",
            "labels": {"app.kubernetes.io/name": "api", "pod-template-hash": "7c9d8b6f5", "tier": "backend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-09-12T08:30:00Z"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-7c9d8b6f5",
                "uid": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "controller": true, "blockOwnerDeletion": true
            }],
            "managedFields": [{
                "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": "2024-09-12T08:30:15Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/name": {}}, "f:ownerReferences": {".": {}}}, "f:spec": {"f:containers": {}}}
            }]
        },
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": "settings", "defaultMode": 420}},
                {"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ], "defaultMode": 420}}
            ],
            "containers": [
                container("api", "registry.example.com/api:v1.8.2", 8080),
                container("sidecar", "registry.example.com/proxy:2.0", 9090)
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "serviceAccountName": "api",
            "serviceAccount": "api",
            "nodeName": format!("ip-10-0-{}-{}.ec2.internal", i % 16, i % 250),
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": format!("10.0.{}.{}", i % 16, i % 250),
            "hostIPs": [{"ip": format!("10.0.{}.{}", i % 16, i % 250)}],
            "podIP": format!("10.244.{}.{}", i / 250 % 250, i % 250),
            "podIPs": [{"ip": format!("10.244.{}.{}", i / 250 % 250, i % 250)}],
            "startTime": "2024-09-12T08:30:15Z",
            "containerStatuses": [
                container_status("api", "registry.example.com/api:v1.8.2"),
                container_status("sidecar", "registry.example.com/proxy:2.0")
            ],
            "qosClass": "Burstable"
        }
    })
}

#[cfg(test)]
mod tests {
    use apistore_protobuf::KubeProtobuf;
    use apistore_storage::DynamicObject;

    use super::*;

    #[test]
    fn the_pod_encodes_to_protobuf_and_back_to_the_same_json() {
        let kp = KubeProtobuf::k8s_1_31();
        let stored = kp.encode_value(&pod(7)).unwrap();
        assert!(apistore_protobuf::is_protobuf(&stored));
        let json = kp.decode_to_json(&stored).unwrap();
        assert_eq!(kp.encode_json(&json).unwrap(), stored);
        let back: DynamicObject = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.metadata.name, pod_name(7));
        assert!(json.len() > 3000, "{} bytes", json.len());
    }

    #[test]
    fn the_pod_read_lazily_writes_back_byte_for_byte_and_shows_the_same_body() {
        use apistore_protobuf::{LazyCodec, MediaType, StorageCodec};
        use apistore_storage::{Codec, KubeVersion};
        let kp = KubeProtobuf::k8s_1_31();
        let lazy = LazyCodec::for_kube(MediaType::Protobuf, KubeVersion::V1_31);
        let dynamic =
            StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, KubeVersion::V1_31);
        for i in [0, 7, 4_242, 9_999] {
            let stored = kp.encode_value(&pod(i)).unwrap();
            let mut object = lazy.decode(&stored).unwrap();
            // A store stamps the revision on a read and clears it before a write.
            object.metadata_mut().resource_version = "12".to_owned();
            object.metadata_mut().resource_version.clear();
            assert_eq!(lazy.encode(&object).unwrap(), stored, "Pod {i}");
            let whole = dynamic.decode(&stored).unwrap();
            assert_eq!(object.metadata(), &whole.metadata);
            assert_eq!(object.body().unwrap(), &whole.data);
            // A label change lands and leaves everything after the metadata as stored.
            object
                .metadata_mut()
                .labels
                .insert("x".to_owned(), "y".to_owned());
            let written = lazy.encode(&object).unwrap();
            let back = dynamic.decode(&written).unwrap();
            assert_eq!(back.metadata.labels["x"], "y");
            assert_eq!(back.data, whole.data);
            let tail = 600;
            assert_eq!(
                written[written.len() - tail..],
                stored[stored.len() - tail..]
            );
        }
    }
}
