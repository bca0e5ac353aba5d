from django.db import models


class SourceKind(models.TextChoices):
    S3 = "s3", "S3-compatible prefix"
    NFS = "nfs", "NFS export"
    HOST_PATH = "host_path", "Host path (allowed on a pool)"
