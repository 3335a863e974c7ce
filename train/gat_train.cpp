// gat_train: placeholder until the training program lands (issue: GAT layer and training).
int main() { return 0; }
