from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0005_accelerators'),
    ]

    operations = [
        migrations.AddField(
            model_name='resourcepool',
            name='outbound_access',
            field=models.BooleanField(default=True, help_text='Workloads of this pool may reach public internet addresses (pip install, model downloads). Loopback, private and link-local addresses are never reachable.'),
        ),
        migrations.AddField(
            model_name='resourcepool',
            name='fetch_allowed_hosts',
            field=models.JSONField(blank=True, default=list, help_text='Hosts (name, IP, or host:port) that dataset endpoints and other URLs Cairn fetches may use although they resolve to private or loopback addresses. Empty: none.'),
        ),
    ]
