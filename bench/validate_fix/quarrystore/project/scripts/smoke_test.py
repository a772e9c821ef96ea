"""Post-deploy smoke test for a quarrystore gateway: put, head, get, multipart, delete.

Usage: python3 scripts/smoke_test.py --endpoint https://s3.quarry.internal [--bucket smoke]
Credentials come from the usual AWS_* environment variables.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
import uuid

import boto3
from botocore.config import Config

PART_SIZE = 8 * 1024 * 1024


def sha256_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def run(endpoint: str, bucket: str) -> None:
    s3 = boto3.client("s3", endpoint_url=endpoint, config=Config(retries={"max_attempts": 3}, connect_timeout=5, read_timeout=30))
    key = f"smoke/{uuid.uuid4()}"
    body = os.urandom(1024)
    s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumSHA256=sha256_b64(body))
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == sha256_b64(body), "checksum not returned"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body

    upload = s3.create_multipart_upload(Bucket=bucket, Key=key + ".mp", ChecksumAlgorithm="SHA256")
    parts = []
    for number, chunk in enumerate((os.urandom(PART_SIZE), os.urandom(1024)), start=1):
        part = s3.upload_part(Bucket=bucket, Key=key + ".mp", UploadId=upload["UploadId"], PartNumber=number,
                              Body=chunk, ChecksumSHA256=sha256_b64(chunk))
        parts.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumSHA256": part["ChecksumSHA256"]})
    s3.complete_multipart_upload(Bucket=bucket, Key=key + ".mp", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts})

    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key}, {"Key": key + ".mp"}]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", default="smoke")
    args = parser.parse_args()
    run(args.endpoint, args.bucket)
    print("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
