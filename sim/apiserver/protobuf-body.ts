/**
 * Kubernetes' protobuf encoding, for the request bodies kubectl sends that way: imperative
 * `kubectl create namespace|configmap|secret` use typed clients whose default content type is
 * `application/vnd.kubernetes.protobuf`, and a real API server accepts it. A body is the magic
 * `k8s\0` then a `runtime.Unknown` envelope whose `raw` field is the object itself.
 *
 * Only the kinds kubectl creates this way are described, with the field numbers of k8s.io/api's
 * and apimachinery's generated.proto; anything else is refused with 415, as a server that cannot
 * decode a media type answers.
 */
import protobuf from 'protobufjs';

export const PROTOBUF_CONTENT_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const SCHEMA = `
syntax = "proto2";
message TypeMeta { optional string apiVersion = 1; optional string kind = 2; }
message Unknown { optional TypeMeta typeMeta = 1; optional bytes raw = 2; optional string contentEncoding = 3; optional string contentType = 4; }
message Time { optional int64 seconds = 1; optional int32 nanos = 2; }
message OwnerReference { optional string kind = 1; optional string name = 3; optional string uid = 4; optional string apiVersion = 5; optional bool controller = 6; optional bool blockOwnerDeletion = 7; }
message ObjectMeta {
  optional string name = 1; optional string generateName = 2; optional string namespace = 3;
  optional string uid = 5; optional string resourceVersion = 6;
  map<string, string> labels = 11; map<string, string> annotations = 12;
  repeated OwnerReference ownerReferences = 13; repeated string finalizers = 14;
}
message NamespaceSpec { repeated string finalizers = 1; }
message Namespace { optional ObjectMeta metadata = 1; optional NamespaceSpec spec = 2; }
message ConfigMap { optional ObjectMeta metadata = 1; map<string, string> data = 2; map<string, bytes> binaryData = 3; optional bool immutable = 4; }
message Secret { optional ObjectMeta metadata = 1; map<string, bytes> data = 2; optional string type = 3; map<string, string> stringData = 4; optional bool immutable = 5; }
`;

const root = protobuf.parse(SCHEMA, { keepCase: true }).root;
const envelope = root.lookupType('Unknown');
const KINDS: Record<string, protobuf.Type> = {
  'v1/Namespace': root.lookupType('Namespace'),
  'v1/ConfigMap': root.lookupType('ConfigMap'),
  'v1/Secret': root.lookupType('Secret'),
};

export class UnsupportedProtobuf extends Error {}

/** The object a protobuf body carries, as the JSON a client would have sent. */
export function decodeProtobufBody(body: Buffer): Record<string, unknown> {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC))
    throw new UnsupportedProtobuf('the body does not start with the k8s protobuf magic');
  const unknown = envelope.toObject(envelope.decode(body.subarray(MAGIC.length)), { defaults: false }) as {
    typeMeta?: { apiVersion?: string; kind?: string };
    raw?: Uint8Array;
  };
  const apiVersion = unknown.typeMeta?.apiVersion ?? '';
  const kind = unknown.typeMeta?.kind ?? '';
  const type = KINDS[`${apiVersion}/${kind}`];
  if (!type) throw new UnsupportedProtobuf(`protobuf bodies of ${apiVersion} ${kind} are not supported; send JSON`);
  // bytes as base64 strings and int64 as numbers: exactly the object's JSON form.
  const object = type.toObject(type.decode(unknown.raw ?? new Uint8Array()), {
    bytes: String,
    longs: Number,
    defaults: false,
  });
  return { apiVersion, kind, ...object };
}
