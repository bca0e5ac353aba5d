from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("clusters", "0008_pool_pending_timeout"),
    ]

    operations = [
        migrations.AddField(
            model_name="resourcepool",
            name="locality_wait_seconds",
            field=models.PositiveIntegerField(
                default=20,
                help_text="Seconds a workload whose datasets a node of this pool caches may wait for such a node "
                          "(delay scheduling); 0: no waiting, it starts wherever it fits best."),
        ),
    ]
