// check.mjs ENDPOINT BUCKET KEY...: AWS's own S3 client (@aws-sdk/client-s3)
// gets each object with ChecksumMode ENABLED, as AWS's SDKs do to have
// the answer's x-amz-checksum-* validated against the bytes by the client
// itself.  One JSON line per key: what it got, or the error it raised
// (a checksum that does not match the bytes is one).
import { S3Client, GetObjectCommand } from "@aws-sdk/client-s3";

const [endpoint, bucket, ...keys] = process.argv.slice(2);
const client = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "test:tester", secretAccessKey: "tester-7QfZ-s3key" },
  responseChecksumValidation: "WHEN_SUPPORTED",
});
for (const key of keys) {
  try {
    const r = await client.send(new GetObjectCommand({
      Bucket: bucket, Key: key, ChecksumMode: "ENABLED" }));
    const body = Buffer.from(await r.Body.transformToByteArray());
    console.log(JSON.stringify({
      key, ok: true, length: body.length, etag: r.ETag,
      sha256: r.ChecksumSHA256 ?? null,
      crc64nvme: r.ChecksumCRC64NVME ?? null,
      type: r.ChecksumType ?? null,
      sse: r.ServerSideEncryption ?? null }));
  } catch (e) {
    console.log(JSON.stringify({ key, ok: false,
                                 error: `${e.name}: ${e.message}` }));
  }
}
