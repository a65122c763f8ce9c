"""Horovod's elastic PyTorch MNIST example, as a Horovod script running
unchanged under horovodd (`import horovod.torch as hvd`), on synthetic
MNIST-shaped data (torchvision's FakeData).

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh \
        python3 pytorch_mnist_elastic.py --epochs 2

Training state (model, optimizer, epoch, batch, sampler) is committed every
--batches-per-commit batches; after a membership change hvd.elastic.run
restores or keeps it, syncs it from a surviving worker and carries on.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
from torchvision import datasets, transforms

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch MNIST Elastic Example")
parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                    help="input batch size for training")
parser.add_argument("--epochs", type=int, default=10, metavar="N",
                    help="number of epochs to train")
parser.add_argument("--lr", type=float, default=0.01, metavar="LR", help="learning rate")
parser.add_argument("--momentum", type=float, default=0.5, metavar="M", help="SGD momentum")
parser.add_argument("--seed", type=int, default=42, metavar="S", help="random seed")
parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                    help="how many batches to wait before logging training status")
parser.add_argument("--batches-per-commit", type=int, default=1,
                    help="number of batches processed before calling `state.commit()`")
parser.add_argument("--train-samples", type=int, default=60000,
                    help="synthetic training samples")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

transform = transforms.Compose([transforms.ToTensor(),
                                transforms.Normalize((0.1307,), (0.3081,))])
train_dataset = datasets.FakeData(size=args.train_samples, image_size=(1, 28, 28),
                                  num_classes=10, transform=transform, random_offset=0)
# Horovod: the elastic sampler re-deals the epoch's remaining samples after
# every membership change.
train_sampler = hvd.elastic.ElasticSampler(train_dataset, shuffle=True)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                           sampler=train_sampler)

model = Net()
lr_scaler = hvd.size()
optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


@hvd.elastic.run
def train(state):
    # Horovod: resume from the committed epoch and batch.
    for state.epoch in range(state.epoch, args.epochs + 1):
        state.model.train()
        train_sampler.set_epoch(state.epoch)
        steps_remaining = len(train_loader)
        for state.batch, (data, target) in enumerate(train_loader):
            state.optimizer.zero_grad()
            output = state.model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            state.optimizer.step()
            # The sampler records what this epoch has processed.
            state.train_sampler.record_batch(state.batch, args.batch_size)
            if state.batch % args.log_interval == 0 and hvd.rank() == 0:
                print(f"Train Epoch: {state.epoch} "
                      f"[{state.batch * len(data)}/{len(train_sampler)}]"
                      f"\tLoss: {loss.item():.6f}", flush=True)
            steps_remaining -= 1
            if state.batch % args.batches_per_commit == 0:
                # Horovod: commit the state, and check for host updates.
                state.commit()
        state.batch = 0
        state.train_sampler.set_epoch(state.epoch + 1)
        state.commit()


def on_state_reset():
    # Horovod: scale the learning rate to the new number of workers.
    for param_group in optimizer.param_groups:
        param_group["lr"] = args.lr * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, train_sampler=train_sampler, epoch=1,
                               batch=0)
state.register_reset_callbacks([on_state_reset])
train(state)
if hvd.rank() == 0:
    print(f"mnist elastic done at size {hvd.size()}", flush=True)
