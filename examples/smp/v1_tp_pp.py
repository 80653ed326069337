"""SMP v1 tensor parallelism + pipeline parallelism: the seed script ("kombiniert mit Pipeline-Parallelität").

Changes from the seed, and only these: synthetic MNIST-shaped data, ``optim.Adadelta`` (seed typo
``AdaDelta``), a device that falls back to CPU. mp_parameters:
{"microbatches": 4, "pipeline_parallel_degree": 2, "placement_strategy": "cluster", "tensor_parallel_degree": 2, "ddp": true}
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import smdistributed.modelparallel.torch as smp

STEPS = 3


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        return F.log_softmax(x, 1)


@smp.step
def train_step(model, data, target):
    output = model(data)
    loss = F.nll_loss(output, target, reduction="mean")
    model.backward(loss)
    return output, loss


def train(model, device, train_loader, optimizer):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        _, loss_mb = train_step(model, data, target)
        loss = loss_mb.reduce_mean()
        optimizer.step()
        if smp.rank() == 0:
            print(f"step {batch_idx} loss {loss.item():.4f}", flush=True)


def synthetic_mnist(n: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g))


smp.init()
torch.cuda.set_device(smp.local_rank())
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dataset = synthetic_mnist(16 * STEPS * smp.dp_size())
smp.barrier()
if smp.dp_size() > 1:
    dataset = torch.utils.data.Subset(dataset, range(smp.dp_rank(), len(dataset), smp.dp_size()))
train_loader = torch.utils.data.DataLoader(dataset, batch_size=16, drop_last=True)
model = Net()
smp.set_tensor_parallelism(model.fc1, True)
model = smp.DistributedModel(model)
optimizer = optim.Adadelta(model.parameters(), lr=4.0)
optimizer = smp.DistributedOptimizer(optimizer)
train(model, device, train_loader, optimizer)
